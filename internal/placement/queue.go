package placement

import (
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// QueueKey names the queue a task waits in on its cluster (queue.Key's
// Topology). Jobs of one queue take turns at its single acquiring slot, so
// the key groups exactly the jobs that compete for the same capacity and
// nothing else:
//   - TPU: generation and slice topology, the topology lower-cased as node
//     pools are labelled (v7x:2x2x4): slices of one generation and shape
//     come from the same quota, while a v6e 2x2x4 and a v7x 2x2x4 on one
//     cluster are different machines and never wait for each other;
//   - GPU: type and GPUs per host (nvidia-h100-80gb:8): each is its own
//     machine type and node pool, so an H100 job never waits behind an L4
//     job's pool;
//   - CPU only: "cpu": standing nodes, nothing to provision.
//
// The resource manager queues by it and `falcon exp explain` reads the
// clusters' reported queues by it, so both must name a queue alike.
func QueueKey(ts *falconv1.TaskSpec) string {
	topo := strings.ToLower(strings.TrimSpace(ts.GetDeviceTopo()))
	spec, err := accelerator.Lookup(ts.GetDeviceType())
	switch {
	case err != nil:
		// Unknown to this build (refused at submission, so only an old
		// row): a queue of its own rather than someone else's.
		return joinKey(strings.ToLower(strings.TrimSpace(ts.GetDeviceType())), topo)
	case spec.Kind == accelerator.KindGPU:
		n := int(ts.GetDeviceCount())
		if n == 0 {
			n = spec.DefaultGPUs
		}
		return fmt.Sprintf("%s:%d", spec.Name, n)
	case spec.Kind == accelerator.KindCPU:
		return "cpu"
	}
	return joinKey(spec.Name, topo) // a TPU without a topology is refused at submission
}

func joinKey(kind, topo string) string {
	switch {
	case kind == "":
		return topo
	case topo == "":
		return kind
	}
	return kind + ":" + topo
}

// QueueCluster is a registered cluster as selection (package queue) sees
// it: what it offers by the scheduler's preference (Offers), its queue
// bound, and the registry's own priorities for the decision record. Whether
// it is active for this caller, what a fallback cluster takes, its idle
// pools and its probe are the caller's to add.
func QueueCluster(c *falconv1.Cluster) queue.Cluster {
	qc := queue.Cluster{Name: c.GetName(), Accelerators: Offers(c), MaxQueueDepth: int(c.GetMaxQueueDepth())}
	if slots := c.GetAccelerators(); len(slots) > 0 {
		qc.RegistryPriority = make(map[string]int, len(slots))
		for _, a := range slots {
			qc.RegistryPriority[a.GetType()] = int(a.GetPriority())
		}
	}
	return qc
}

// QueueProbe is a cluster's last health probe as selection reads it; nil
// for none.
func QueueProbe(p *falconv1.ClusterProbe) *queue.Probe {
	if p == nil {
		return nil
	}
	return &queue.Probe{Reachable: p.GetReachable(), QueueDepth: int(p.GetQueueDepth()), RunningCount: int(p.GetRunningCount()),
		Error: p.GetError(), ProbedAt: p.GetProbedAt().AsTime()}
}

// SelectionRecord is selection's decision record as a job's row keeps it
// and `falcon exp explain` shows it, so the record the resource manager
// wrote and the one explain computes for "where it would go now" read alike.
func SelectionRecord(sel queue.Selection) *falconv1.ClusterSelection {
	out := &falconv1.ClusterSelection{
		AcceleratorType: sel.AcceleratorType, Topology: sel.Topology, Policy: string(sel.Policy),
		SelectedCluster: sel.Selected, Reason: sel.Reason, DecidedAt: timestamppb.New(sel.DecidedAt),
	}
	for _, c := range sel.Candidates {
		sc := &falconv1.SelectionCandidate{
			Cluster: c.Cluster, Active: c.Active, Offers: c.Offers, Priority: int32(c.Priority),
			QueueDepth: int32(c.QueueDepth), MaxQueueDepth: int32(c.MaxQueueDepth), IdlePools: int32(c.IdlePools),
			Rank: int32(c.Rank), Rejected: c.Rejected,
		}
		if p := c.Probe; p != nil {
			sc.Probe = &falconv1.ClusterProbe{Cluster: c.Cluster, Reachable: p.Reachable, Error: p.Error, ProbedAt: timestamppb.New(p.ProbedAt)}
			if p.Reachable {
				sc.Probe.QueueDepth, sc.Probe.RunningCount = proto.Int32(int32(p.QueueDepth)), proto.Int32(int32(p.RunningCount))
			}
		}
		out.Candidates = append(out.Candidates, sc)
	}
	return out
}

// PoolShape is the shape of node pool a task runs on, as pools are
// labelled and matched for reuse (accelerator.Slice.PoolShape): a TPU's
// topology, a GPU's hosts and GPUs per host (1x8gpu), so an 8-GPU pool
// never serves a 4-GPU task; the lower-cased topology for a task this build
// cannot resolve (an old row). A multi-slice task runs on a group of pools,
// one per slice, whose shape counts the slices (GroupShape).
func PoolShape(ts *falconv1.TaskSpec) string {
	sl, err := accelerator.Resolve(ts.GetDeviceType(), ts.GetDeviceTopo(), int(ts.GetReplica()), int(ts.GetDeviceCount()))
	if err != nil {
		return GroupShape(strings.ToLower(ts.GetDeviceTopo()), Slices(ts))
	}
	return GroupShape(sl.PoolShape(), Slices(ts))
}
