package cloudlogtest

import (
	"fmt"
	"strconv"
	"time"

	"cloud.google.com/go/logging/apiv2/loggingpb"
	monitoredres "google.golang.org/genproto/googleapis/api/monitoredres"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// Label keys of a pod's labels as GKE writes them on its container log
// entries: "k8s-pod/" and the Kubernetes key with dots turned into
// underscores. They are spelled out here rather than taken from package
// cloudlog so that a mistake there is not mirrored by the fake.
const (
	JobNameLabel         = "k8s-pod/batch_kubernetes_io/job-name"
	CompletionIndexLabel = "k8s-pod/batch_kubernetes_io/job-completion-index"
)

// Workload names the pods of one Kubernetes Job on one GKE cluster.
type Workload struct {
	Project, Location, Cluster, Namespace, Job string
}

// Pod is the name the Job controller gives the pod of an Indexed Job's
// rank: <job>-<index>-<random suffix>.
func (w Workload) Pod(rank int) string {
	return fmt.Sprintf("%s-%d-x7k2p", w.Job, rank)
}

// Entry is the k8s_container log entry GKE writes for one line a container
// of pod printed on stdout. A rank >= 0 becomes the job-completion-index
// label; a negative rank leaves the label off, as on pods that do not carry
// it, so that only the pod name tells the rank.
func (w Workload) Entry(pod string, rank int, ts time.Time, text string) *loggingpb.LogEntry {
	labels := map[string]string{
		JobNameLabel: w.Job,
		"k8s-pod/batch_kubernetes_io/controller-uid": "3f1c2a9e-0000-4000-8000-000000000000",
		"compute.googleapis.com/resource_name":       "gke-node-1",
	}
	if rank >= 0 {
		labels[CompletionIndexLabel] = strconv.Itoa(rank)
	}
	return &loggingpb.LogEntry{
		LogName: "projects/" + w.Project + "/logs/stdout",
		Resource: &monitoredres.MonitoredResource{
			Type: "k8s_container",
			Labels: map[string]string{
				"project_id":     w.Project,
				"location":       w.Location,
				"cluster_name":   w.Cluster,
				"namespace_name": w.Namespace,
				"pod_name":       pod,
				"container_name": "main",
			},
		},
		Timestamp: timestamppb.New(ts),
		Severity:  0,
		Labels:    labels,
		Payload:   &loggingpb.LogEntry_TextPayload{TextPayload: text},
	}
}

// JSONEntry is Entry for a container that logs structured JSON: GKE puts
// the object in jsonPayload, the line in its "message" field.
func (w Workload) JSONEntry(pod string, rank int, ts time.Time, message string) *loggingpb.LogEntry {
	e := w.Entry(pod, rank, ts, "")
	e.Payload = &loggingpb.LogEntry_JsonPayload{JsonPayload: &structpb.Struct{Fields: map[string]*structpb.Value{
		"message": structpb.NewStringValue(message),
		"level":   structpb.NewStringValue("info"),
	}}}
	return e
}
