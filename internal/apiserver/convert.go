package apiserver

import (
	"google.golang.org/protobuf/encoding/protojson"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/store"
)

func ts(t time.Time) *timestamppb.Timestamp {
	if t.IsZero() {
		return nil
	}
	return timestamppb.New(t)
}

func tsp(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return ts(*t)
}

func taskToAPI(t store.TaskSpec) *falconv1.TaskSpec {
	return &falconv1.TaskSpec{
		Command: t.Command, Replica: t.Replica, Image: t.Image,
		DeviceCount: t.DeviceCount, DeviceType: t.DeviceType, DeviceTopo: t.DeviceTopo,
		Envs: t.Envs, TimeoutSeconds: int32(t.TimeoutSeconds), SupplyMode: t.SupplyMode, Slices: t.Slices,
		Resources: resourcesToAPI(t.Resources),
	}
}

func taskFromAPI(t *falconv1.TaskSpec) store.TaskSpec {
	return store.TaskSpec{
		Command: t.GetCommand(), Replica: t.GetReplica(), Image: t.GetImage(),
		DeviceCount: t.GetDeviceCount(), DeviceType: t.GetDeviceType(), DeviceTopo: t.GetDeviceTopo(),
		Envs: t.GetEnvs(), TimeoutSeconds: int64(t.GetTimeoutSeconds()), SupplyMode: t.GetSupplyMode(), Slices: t.GetSlices(),
		Resources: resourcesFromAPI(t.GetResources()),
	}
}

func resourcesToAPI(r *store.Resources) *falconv1.Resources {
	if r == nil {
		return nil
	}
	return &falconv1.Resources{Requests: r.Requests, Limits: r.Limits}
}

// resourcesFromAPI stores empty resources as none, so that `resources: {}`
// and no resources read back the same.
func resourcesFromAPI(r *falconv1.Resources) *store.Resources {
	if len(r.GetRequests()) == 0 && len(r.GetLimits()) == 0 {
		return nil
	}
	return &store.Resources{Requests: r.GetRequests(), Limits: r.GetLimits()}
}

func expToAPI(e *store.Experiment) *falconv1.Experiment {
	roles := make(map[string]*falconv1.TaskSpec, len(e.RoleToTaskSpec))
	for r, t := range e.RoleToTaskSpec {
		roles[r] = taskToAPI(t)
	}
	var metrics []*falconv1.MetricSpec
	for _, m := range e.Metrics {
		metrics = append(metrics, &falconv1.MetricSpec{Name: m.Name, Pattern: m.Pattern, Better: m.Better})
	}
	x := &falconv1.Experiment{
		Metrics: metrics,
		Id:      e.ID, Name: e.Name, ExpType: e.ExpType, ClusterName: e.ClusterName,
		Priority: e.Priority, Tags: e.Tags, Config: e.Config, RoleToTaskSpec: roles,
		Status: string(e.Status), Reason: e.Reason, Message: e.Message,
		Creator: e.Creator, CreatorId: e.CreatorID, ArtifactPath: e.ArtifactPath,
		Version:   int32(e.Version),
		CreatedAt: ts(e.CreatedAt), UpdatedAt: ts(e.UpdatedAt),
		StartedAt: tsp(e.StartedAt), FinishedAt: tsp(e.FinishedAt),
		AbortingAt: tsp(e.AbortingAt), AbortedAt: tsp(e.AbortedAt),
	}
	ttlToAPI(x, e)
	return x
}

func jobToAPI(j *store.Job) *falconv1.Job {
	return &falconv1.Job{
		Id: j.ID, ExpId: j.ExpID, ExpName: j.ExpName, Role: j.Role,
		ClusterName: j.ClusterName, ExpType: j.ExpType, Priority: j.Priority,
		TaskSpec: taskToAPI(j.TaskSpec), Replica: j.TaskSpec.Replica,
		Status: string(j.Status), Reason: j.Reason, Message: j.Message,
		Creator: j.Creator, ArtifactId: j.ArtifactID, ArtifactPath: j.ArtifactPath,
		Version:   int32(j.Version),
		CreatedAt: ts(j.CreatedAt), UpdatedAt: ts(j.UpdatedAt),
		StartedAt: tsp(j.StartedAt), FinishedAt: tsp(j.FinishedAt),
		AbortingAt: tsp(j.AbortingAt), AbortedAt: tsp(j.AbortedAt),
		DispatchedAt: tsp(j.DispatchedAt), NodePool: j.NodePool,
		Selection: selectionToAPI(j.Selection),
	}
}

// selectionToAPI decodes a job's stored decision record. A record this
// build cannot read (written by a newer one) keeps the fields it knows; one
// that is not JSON at all is left out rather than failing the job's read:
// the record explains, it decides nothing.
func selectionToAPI(s string) *falconv1.ClusterSelection {
	if s == "" {
		return nil
	}
	var sel falconv1.ClusterSelection
	if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal([]byte(s), &sel); err != nil {
		return nil
	}
	return &sel
}

func artifactToAPI(a *store.Artifact) *falconv1.Artifact {
	return &falconv1.Artifact{
		Id: a.ID, ExpId: a.ExpID, Path: a.Path, ArtifactType: a.ArtifactType,
		Status: string(a.Status), Reason: a.Reason, Message: a.Message, Version: int32(a.Version),
		CreatedAt: ts(a.CreatedAt), UpdatedAt: ts(a.UpdatedAt),
		FileCount: a.Index.Files, ByteCount: a.Index.Bytes, IndexComplete: a.Index.Complete,
		IndexedAt: tsp(a.Index.At),
	}
}

// clusterToAPI also serves rows written before clusters had slots (only
// accelerator_types, most preferred first): they show as slots of priority
// 1, 2, ... so every reader sees one shape.
func clusterToAPI(c *store.Cluster) *falconv1.Cluster {
	out := &falconv1.Cluster{
		Id: c.ID, Name: c.Name, Backend: c.Backend, Project: c.Project, Location: c.Location,
		AcceleratorTypes: c.AcceleratorTypes, GcsBucket: c.GCSBucket,
		DefaultReservation: c.DefaultReservation, Status: c.Status, CreatedAt: ts(c.CreatedAt),
		Namespace: c.Spec.Namespace, Kubeconfig: c.Spec.Kubeconfig, KubeContext: c.Spec.KubeContext,
		GkeCluster: c.Spec.GKECluster, MaxQueueDepth: int32(c.Spec.MaxQueueDepth), Labels: c.Spec.Labels,
		ServiceAccount: c.Spec.ServiceAccount, XpkPath: c.Spec.XpkPath, ProbeTimeoutS: int32(c.Spec.ProbeTimeoutS),
		ExtraArgs: c.Spec.ExtraArgs,
	}
	for _, a := range c.Spec.Accelerators {
		out.Accelerators = append(out.Accelerators, &falconv1.AcceleratorSlot{Type: a.Type, Priority: int32(a.Priority), DeviceClass: a.DeviceClass})
	}
	if len(out.Accelerators) == 0 {
		for i, t := range c.AcceleratorTypes {
			out.Accelerators = append(out.Accelerators, &falconv1.AcceleratorSlot{Type: t, Priority: int32(i + 1)})
		}
	}
	out.AcceleratorTypes = clusterconfig.AcceleratorTypes(out.Accelerators)
	return out
}

func userToAPI(u *store.User) *falconv1.User {
	return &falconv1.User{UserId: u.UserID, Email: u.Email, CreatedAt: ts(u.CreatedAt)}
}
