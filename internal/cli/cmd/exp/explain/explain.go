package explain

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/placement"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// Options are the inputs of `falcon exp explain`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer
	Now     func() time.Time

	ID string
}

// NewCmdExplain builds the command. runF replaces explainRun in tests.
func NewCmdExplain(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer, Now: f.Clock()}
	return &cobra.Command{
		Use: "explain EXP",
		Example: `  falcon exp explain exp-ki5t2jegpi
  falcon exp explain my-run -o json --jq '.jobs[].selection.reason'`,
		Short: "Say where each job of an experiment is and why: its cluster, why not the others, why still waiting",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return explainRun(cmd.Context(), opts)
		},
	}
}

func explainRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	exp, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: opts.ID})
	if err != nil {
		return err
	}
	jobs, err := c.ListJobs(ctx, &falconv1.ListJobsRequest{ExpId: exp.GetId(), PageSize: 1000})
	if err != nil {
		return err
	}
	// The registry says which clusters no probe asks; a waiting job needs
	// it in full (readFleet), the others only for that.
	registry, registryErr := c.ListClusters(ctx, &falconv1.ListClustersRequest{})
	out := &falconv1.ExpExplanation{
		ExpId: exp.GetId(), ExpName: exp.GetName(), Status: exp.GetStatus(), Reason: exp.GetReason(), Message: exp.GetMessage(),
	}
	var fleet *fleet
	for _, j := range jobs.GetItems() {
		je := &falconv1.JobExplanation{
			JobId: j.GetId(), Role: j.GetRole(), Status: j.GetStatus(), Reason: j.GetReason(), Message: j.GetMessage(),
			Cluster: j.GetClusterName(), Selection: j.GetSelection(),
		}
		if j.GetStatus() == "Pending" && j.GetReason() == "Waiting" {
			if fleet == nil {
				if registryErr != nil {
					return registryErr
				}
				if fleet, err = readFleet(ctx, c, registry); err != nil {
					return err
				}
			}
			fleet.explainWaiting(j, je, opts.Now())
		}
		out.Jobs = append(out.Jobs, je)
	}
	// Which clusters a probe never asks, so the view does not say
	// "never probed" of them as of one not probed yet.
	unprobed := map[string]string{}
	for _, x := range registry.GetItems() {
		if !clusterconfig.Probed(x.GetBackend()) {
			unprobed[x.GetName()] = x.GetBackend()
		}
	}
	return opts.Printer().Print(out, view(out, unprobed))
}

// fleet is what the client can read of the clusters: the registry, each
// one's reported status and last probe.
type fleet struct {
	policy   queue.Policy // the registry's selection
	clusters []*falconv1.Cluster
	status   map[string]*falconv1.ClusterStatus
	probes   map[string]*falconv1.ClusterProbe
}

func readFleet(ctx context.Context, c *client.Client, cl *falconv1.ListClustersResponse) (*fleet, error) {
	var err error
	f := &fleet{clusters: cl.GetItems(), status: map[string]*falconv1.ClusterStatus{}, probes: map[string]*falconv1.ClusterProbe{}}
	if f.policy, err = queue.ParsePolicy(cl.GetSelection()); err != nil {
		return nil, fmt.Errorf("the registry's %v; this falcon is older than its server", err)
	}
	if pr, err := c.ListClusterProbes(ctx, &falconv1.ListClusterProbesRequest{}); err == nil {
		for _, p := range pr.GetItems() {
			f.probes[p.GetCluster()] = p
		}
	}
	for _, x := range f.clusters {
		// A cluster never reported is judged with empty queues.
		if st, err := c.GetClusterStatus(ctx, &falconv1.GetClusterStatusRequest{Name: x.GetName()}); err == nil {
			f.status[x.GetName()] = st
		}
	}
	return f, nil
}

var positionRE = regexp.MustCompile(`^queue position #(\d+)`)

func (f *fleet) explainWaiting(j *falconv1.Job, je *falconv1.JobExplanation, now time.Time) {
	typ, topo := placement.DeviceType(j.GetTaskSpec().GetDeviceType()), placement.QueueKey(j.GetTaskSpec())
	if m := positionRE.FindStringSubmatch(j.GetMessage()); m != nil {
		n, _ := strconv.Atoi(m[1])
		je.Position = int32(n)
	}
	// Its queue: the cluster its record chose (written with its first
	// position), or, for a job placed before records were kept, the one
	// cluster with jobs waiting for its shape.
	if chosen := j.GetSelection().GetSelectedCluster(); chosen != "" {
		je.Queue = chosen + "/" + topo
		for _, q := range f.status[chosen].GetQueues() {
			if q.GetTopology() == topo {
				je.SlotHolder = q.GetAcquiringJobId()
			}
		}
	} else {
		var holders []string
		for _, x := range f.clusters {
			for _, q := range f.status[x.GetName()].GetQueues() {
				if q.GetTopology() != topo || q.GetWaiting() == 0 {
					continue
				}
				holders = append(holders, x.GetName())
				if je.Queue == "" {
					je.Queue, je.SlotHolder = x.GetName()+"/"+topo, q.GetAcquiringJobId()
				}
			}
		}
		if len(holders) > 1 {
			je.Queue, je.SlotHolder = "", ""
		}
	}
	cands := make([]queue.Cluster, 0, len(f.clusters))
	for _, x := range f.clusters {
		cands = append(cands, f.candidate(x, typ))
	}
	sj := queue.Job{ID: j.GetId(), Actor: "-", AcceleratorType: typ, Topology: topo, Shape: placement.PoolShape(j.GetTaskSpec()), Created: j.GetCreatedAt().AsTime()}
	if j.GetDispatchedAt() == nil {
		sj.PinnedCluster = j.GetClusterName()
	}
	depth := func(k queue.Key) int {
		for _, q := range f.status[k.Cluster].GetQueues() {
			if q.GetTopology() == k.Topology {
				n := int(q.GetWaiting())
				if q.GetAcquiringJobId() != "" {
					n++
				}
				return n
			}
		}
		return 0
	}
	sel, err := queue.Explain(sj, cands, depth, f.policy, now)
	je.Now = placement.SelectionRecord(sel)
	if err != nil {
		je.NoAvailableCluster = (&queue.NoAvailableClusterError{Selection: sel}).Error()
	}
}

// candidate is a registered cluster as the resource manager's candidates
// describe it to selection (placement.QueueCluster), active by its status,
// with its last probe; a fallback cluster (one listing no types) offers
// the job's type when no other cluster lists it (placement.Takes).
func (f *fleet) candidate(x *falconv1.Cluster, typ string) queue.Cluster {
	qc := placement.QueueCluster(x)
	qc.Active = x.GetStatus() == "active"
	if placement.Fallback(x) && placement.Takes(x, typ, f.clusters) {
		qc.Accelerators[typ] = 0
	}
	qc.Probe = placement.QueueProbe(f.probes[x.GetName()])
	return qc
}
