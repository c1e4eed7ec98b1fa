package status

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon cluster status`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	Name string
	// Probe probes the clusters now instead of showing the last probe.
	Probe bool
}

// NewCmdStatus builds the command. runF replaces statusRun in tests.
func NewCmdStatus(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "status [NAME]",
		Short: "Show clusters' health and capacity: last probe, reservation, node pools and queues",
		Long: `Show what the resource manager last reported of a cluster: how much of its
default reservation is free, the node pools Falcon created on it (which job
owns each, or how long it has been idle), and per topology how many jobs
wait, which one is acquiring capacity and how many run. Without NAME, every
registered cluster is shown, which answers "where could my job go".

The view is as old as the last report, shown at the top; a cluster no
controller has reported on yet has none. Below it is the cluster's last
health probe (the controller probes every active cluster every 30s, each
within its probe_timeout_s): reachable or not and why, how many workloads
wait and run, and how long ago. --probe probes now, from the API server.`,
		Example: `  falcon cluster status tpu-east
  falcon cluster status tpu-east -o json
  falcon cluster status --probe          # probe every active cluster now
  falcon cluster status                  # every cluster`,
		Args: nameArg,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Name = args[0]
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return statusRun(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.Probe, "probe", false, "probe the cluster(s) now before showing them")
	return cmd
}

// nameArg names the missing argument, which cobra.ExactArgs ("accepts 1
// arg(s), received 0") does not.
func nameArg(_ *cobra.Command, args []string) error {
	if len(args) <= 1 {
		return nil
	}
	return fmt.Errorf("accepts one cluster NAME, received %d arguments: %s", len(args), strings.Join(args, " "))
}

func statusRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	var cl *falconv1.Cluster
	if opts.Name != "" {
		if cl, err = c.GetCluster(ctx, &falconv1.GetClusterRequest{Name: opts.Name}); err != nil {
			return err
		}
		if opts.Probe && !clusterconfig.Probed(cl.GetBackend()) {
			return errdefs.Invalid("--probe", "cluster %s runs its jobs as the controller's own processes (backend %s) and is not probed", cl.GetName(), cl.GetBackend())
		}
	}
	if opts.Probe {
		req := &falconv1.ProbeClustersRequest{}
		if opts.Name != "" {
			req.Names = []string{opts.Name}
		}
		if _, err := c.ProbeClusters(ctx, req); err != nil {
			return err
		}
	}
	if cl != nil {
		st, err := c.GetClusterStatus(ctx, &falconv1.GetClusterStatusRequest{Name: opts.Name})
		if err != nil {
			return err
		}
		return opts.Printer().Print(st, view(st, cl.GetBackend()))
	}
	clusters, err := c.ListClusters(ctx, &falconv1.ListClustersRequest{})
	if err != nil {
		return err
	}
	all := &falconv1.ClusterStatuses{}
	backends := map[string]string{}
	for _, cl := range clusters.GetItems() {
		backends[cl.GetName()] = cl.GetBackend()
		st, err := c.GetClusterStatus(ctx, &falconv1.GetClusterStatusRequest{Name: cl.GetName()})
		if err != nil {
			return err
		}
		all.Items = append(all.Items, st)
	}
	return opts.Printer().Print(all, func(v output.View) error {
		if len(all.GetItems()) == 0 {
			_, err := fmt.Fprintln(v.Out, "No clusters registered")
			return err
		}
		for i, st := range all.GetItems() {
			if i > 0 {
				fmt.Fprintln(v.Out)
			}
			if err := view(st, backends[st.GetClusterName()])(v); err != nil {
				return err
			}
		}
		return nil
	})
}

// view renders the status for people: a header, the reservation, then the
// node pools and queues tables.
func view(st *falconv1.ClusterStatus, backend string) output.TableFunc {
	return func(v output.View) error {
		fmt.Fprintln(v.Out, header(v.Now, st))
		fmt.Fprintln(v.Out, ProbeLine(v.Now, st.GetProbe(), backend))
		if st.GetReportedAt() == nil {
			// Nothing is known: "no node pools" would claim too much.
			return nil
		}
		fmt.Fprintln(v.Out, reservationLine(st.GetReservation()))
		if err := writePools(v, st.GetNodePools()); err != nil {
			return err
		}
		return writeQueues(v.Out, st.GetQueues())
	}
}

func header(now time.Time, st *falconv1.ClusterStatus) string {
	if st.GetReportedAt() == nil {
		return fmt.Sprintf("Cluster %s: no report from a controller yet", st.GetClusterName())
	}
	h := fmt.Sprintf("Cluster %s: reported %s ago", st.GetClusterName(), output.Age(now, st.GetReportedAt()))
	if e := strings.TrimSpace(st.GetError()); e != "" {
		h += "; error: " + e
	}
	return h
}

// ProbeLine is a cluster's last probe for people: its outcome and age.
func ProbeLine(now time.Time, p *falconv1.ClusterProbe, backend string) string {
	switch {
	case p == nil && !clusterconfig.Probed(backend):
		return fmt.Sprintf("Probe: none (%s clusters are not probed: their jobs are the controller's own processes)", backend)
	case p == nil:
		return "Probe: none yet"
	case !p.GetReachable():
		return fmt.Sprintf("Probe: unreachable, %s ago: %s", output.Age(now, p.GetProbedAt()), strings.TrimSpace(p.GetError()))
	}
	return fmt.Sprintf("Probe: reachable, %d queued, %d running, %s ago", p.GetQueueDepth(), p.GetRunningCount(), output.Age(now, p.GetProbedAt()))
}

func reservationLine(r *falconv1.ReservationCapacity) string {
	switch {
	case r == nil:
		return "No default reservation"
	case r.GetError() != "":
		return fmt.Sprintf("Reservation %s: capacity unknown: %s", r.GetName(), r.GetError())
	}
	return fmt.Sprintf("Reservation %s: %d/%d nodes free", r.GetName(), r.GetFree(), r.GetCount())
}

func writePools(v output.View, pools []*falconv1.NodePoolStatus) error {
	fmt.Fprintln(v.Out)
	if len(pools) == 0 {
		_, err := fmt.Fprintln(v.Out, "No node pools")
		return err
	}
	fmt.Fprintln(v.Out, "NODE POOLS")
	type pool = *falconv1.NodePoolStatus
	return output.WriteTable(v.Out, []output.Column[pool]{
		{Header: "NAME", Value: func(p pool) string { return p.GetName() }},
		{Header: "ACCELERATOR", Value: func(p pool) string { return p.GetAcceleratorType() }},
		{Header: "TOPOLOGY", Value: func(p pool) string { return p.GetTopology() }},
		{Header: "NODES", Value: func(p pool) string { return strconv.FormatInt(p.GetNodes(), 10) }},
		{Header: "STATUS", Value: func(p pool) string { return p.GetStatus() }},
		{Header: "MODE", Value: func(p pool) string { return p.GetSupplyMode() }},
		{Header: "OWNER", Value: func(p pool) string {
			if p.GetOwnerJobId() == "" {
				return "idle"
			}
			return p.GetOwnerJobId()
		}},
		{Header: "IDLE", Value: func(p pool) string {
			if p.GetOwnerJobId() != "" || p.GetIdleSince() == nil {
				return "" // shown as "-"
			}
			return idleFor(v.Now.Sub(p.GetIdleSince().AsTime()))
		}},
		{Header: "AGE", Value: func(p pool) string { return output.Age(v.Now, p.GetCreatedAt()) }},
	}, pools)
}

func writeQueues(w io.Writer, queues []*falconv1.QueueStatus) error {
	fmt.Fprintln(w)
	if len(queues) == 0 {
		_, err := fmt.Fprintln(w, "No queues")
		return err
	}
	fmt.Fprintln(w, "QUEUES")
	type queue = *falconv1.QueueStatus
	return output.WriteTable(w, []output.Column[queue]{
		{Header: "TOPOLOGY", Value: func(q queue) string { return q.GetTopology() }},
		{Header: "ACCELERATORS", Value: func(q queue) string { return strings.Join(q.GetAcceleratorTypes(), ",") }},
		{Header: "WAITING", Value: func(q queue) string { return strconv.Itoa(int(q.GetWaiting())) }},
		{Header: "ACQUIRING", Value: func(q queue) string { return q.GetAcquiringJobId() }},
		{Header: "RUNNING", Value: func(q queue) string { return strconv.Itoa(int(q.GetRunning())) }},
	}, queues)
}

// idleFor is how long a pool has been idle, to the minute past the first
// hour ("2h5m"): idle pools are reclaimed after a timeout of minutes, so
// output.ShortDuration's whole hours are too coarse here.
func idleFor(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 24*time.Hour:
		return withRest(int(d.Hours()), "h", int(d.Minutes())%60, "m")
	}
	return withRest(int(d.Hours())/24, "d", int(d.Hours())%24, "h")
}

func withRest(n int, unit string, rest int, restUnit string) string {
	if rest == 0 {
		return fmt.Sprintf("%d%s", n, unit)
	}
	return fmt.Sprintf("%d%s%d%s", n, unit, rest, restUnit)
}
