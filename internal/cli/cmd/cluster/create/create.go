package create

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon cluster create`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	// Filename is a clusters file holding one cluster (-f); "-" is stdin.
	Filename string

	// The flag form.
	Name           string
	Backend        string
	Project        string
	Location       string
	GKECluster     string
	Kubeconfig     string
	Context        string
	Namespace      string
	ServiceAccount string
	Accelerators   []string // TYPE[:PRIORITY]
	Bucket         string
	Reservation    string
	MaxQueueDepth  int32
	Labels         map[string]string
	Status         string
}

// flagOf maps the API's field names to the flags that set them, so the
// registry's rules, checked here before anything is sent, speak in flags.
var flagOf = map[string]string{
	"name": "--name", "backend": "--backend", "project": "--project", "location": "--location",
	"gke_cluster": "--gke-cluster", "kubeconfig": "--kubeconfig", "kube_context": "--context",
	"namespace": "--namespace", "service_account": "--service-account", "accelerators": "--accelerator",
	"gcs_bucket": "--bucket", "default_reservation": "--reservation", "max_queue_depth": "--max-queue-depth",
	"labels": "--label", "status": "--status",
}

// flagForm lists the flags of the flag form; none may be combined with -f.
var flagForm = []string{"name", "backend", "project", "location", "gke-cluster", "kubeconfig", "context",
	"namespace", "service-account", "accelerator", "bucket", "reservation", "max-queue-depth", "label", "status"}

// NewCmdCreate builds the command. runF replaces createRun in tests.
func NewCmdCreate(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:     "create {-f FILE | --name NAME --backend BACKEND [flags]}",
		Aliases: []string{"register"},
		Short:   "Register a cluster, or update the one with its name",
		Long: `Register a cluster experiments can run on, or update the registered
cluster of the same name.

Either from a clusters file holding exactly that cluster (-f FILE, the layout
of ` + "`falcon cluster apply`" + `), or from flags. What each backend needs:

  local       nothing: jobs run as processes on the controller's machine
  kubernetes  --context (and --kubeconfig, default: the usual loading rules)
  gke         --project, --location and --gke-cluster

--accelerator TYPE[:PRIORITY] lists an accelerator type the cluster offers
(repeatable; priority 1, the default, is the most preferred). A cluster that
lists none takes jobs of any type. To keep the whole registry in a file and
in Git, prefer ` + "`falcon cluster apply`" + `.`,
		Example: `  falcon cluster create --name lab --backend kubernetes --context lab-admin \
      --namespace falcon --accelerator h100 --accelerator l4:2 --bucket gs://lab-artifacts
  falcon cluster create --name tpu-east --backend gke --project my-proj \
      --location us-east5-a --gke-cluster tpu-east --accelerator v7x
  falcon cluster create -f lab.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var set []string
			for _, name := range flagForm {
				if cmd.Flags().Changed(name) {
					set = append(set, "--"+name)
				}
			}
			switch {
			case opts.Filename != "" && len(set) > 0:
				return errdefs.Invalid(set[0], "cannot be combined with -f/--filename; put the field in the file instead")
			case opts.Filename == "" && len(set) == 0:
				return errdefs.Invalid("--name", "required: give the cluster with flags (--name, --backend, ...) or a file with -f")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return createRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Filename, "filename", "f", "", "Clusters file holding one cluster; - reads stdin")
	fl.StringVar(&opts.Name, "name", "", "Cluster name (a DNS-1123 label)")
	fl.StringVar(&opts.Backend, "backend", "", "Backend: "+strings.Join(clusterconfig.Backends, ", "))
	fl.StringVar(&opts.Project, "project", "", "GCP project (gke)")
	fl.StringVar(&opts.Location, "location", "", "GKE zone or region (gke)")
	fl.StringVar(&opts.GKECluster, "gke-cluster", "", "GKE cluster name (gke)")
	fl.StringVar(&opts.Kubeconfig, "kubeconfig", "", "Kubeconfig path on the controller's machine (kubernetes)")
	fl.StringVar(&opts.Context, "context", "", "Context in the kubeconfig (kubernetes)")
	fl.StringVar(&opts.Namespace, "namespace", "", "Namespace jobs run in")
	fl.StringVar(&opts.ServiceAccount, "service-account", "", "Kubernetes service account job pods run as (default: the namespace's default)")
	fl.StringArrayVar(&opts.Accelerators, "accelerator", nil, "Accelerator type offered, TYPE[:PRIORITY] (repeatable)")
	fl.StringVar(&opts.Bucket, "bucket", "", "GCS bucket for the cluster's artifacts (name or gs://name)")
	fl.StringVar(&opts.Reservation, "reservation", "", "Default capacity reservation")
	fl.Int32Var(&opts.MaxQueueDepth, "max-queue-depth", 0, "Waiting jobs per topology beyond which it takes no more (0: no limit)")
	fl.StringToStringVar(&opts.Labels, "label", nil, "Label KEY=VALUE (repeatable)")
	fl.StringVar(&opts.Status, "status", "", "active (default), maintenance or offline")
	return cmd
}

func createRun(ctx context.Context, opts *Options) error {
	cluster, err := Cluster(opts)
	if err != nil {
		return err
	}
	c, err := opts.Client()
	if err != nil {
		return err
	}
	out, err := c.RegisterCluster(ctx, &falconv1.RegisterClusterRequest{Cluster: cluster})
	if err != nil {
		return err
	}
	return opts.Printer().Print(out, func(v output.View) error {
		offers := "any accelerator type"
		if ts := out.GetAcceleratorTypes(); len(ts) > 0 {
			offers = strings.Join(ts, ", ")
		}
		fmt.Fprintf(v.Out, "Registered cluster %s (%s): %s, %s, offering %s\n",
			out.GetName(), out.GetId(), out.GetBackend(), out.GetStatus(), offers)
		return nil
	})
}

// Cluster builds the cluster to register from the file or the flags, and
// checks it by the registry's rules. Errors are InvalidArgument and name the
// file's path or the flag at fault.
func Cluster(opts *Options) (*falconv1.Cluster, error) {
	if opts.Filename != "" {
		data, err := factory.ReadFlagFile(opts.IO, "--filename", opts.Filename)
		if err != nil {
			return nil, err
		}
		c, err := clusterconfig.ParseOne(data)
		if err != nil {
			return nil, factory.InFile(opts.Filename, err)
		}
		return c, nil
	}
	var errs errdefs.FieldErrors
	c := &falconv1.Cluster{
		Name: opts.Name, Backend: opts.Backend, Project: opts.Project, Location: opts.Location,
		GkeCluster: opts.GKECluster, KubeContext: opts.Context, Namespace: opts.Namespace,
		ServiceAccount: opts.ServiceAccount, GcsBucket: opts.Bucket, DefaultReservation: opts.Reservation,
		MaxQueueDepth: opts.MaxQueueDepth, Labels: opts.Labels, Status: opts.Status,
	}
	if opts.Kubeconfig != "" {
		k, err := absPath(opts.Kubeconfig)
		if err != nil {
			errs.Add("--kubeconfig", "%v", err)
		}
		c.Kubeconfig = k
	}
	for _, a := range opts.Accelerators {
		slot, err := parseAccelerator(a)
		if err != nil {
			errs.Add("--accelerator", "%v", err)
			continue
		}
		c.Accelerators = append(c.Accelerators, slot)
	}
	if len(errs) == 0 {
		_, nerrs := clusterconfig.Normalize(c)
		for _, e := range nerrs {
			errs.Add(flagPath(e.Field), "%s", strings.ReplaceAll(e.Detail, "accelerators[", "--accelerator["))
		}
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

var accelFlag = regexp.MustCompile(`^([^:]+)(?::(.*))?$`)

// parseAccelerator reads TYPE[:PRIORITY].
func parseAccelerator(s string) (*falconv1.AcceleratorSlot, error) {
	m := accelFlag.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return nil, fmt.Errorf("%q must be TYPE or TYPE:PRIORITY, e.g. v7x or h100:2", s)
	}
	slot := &falconv1.AcceleratorSlot{Type: m[1], Priority: 1}
	if m[2] != "" {
		p, err := strconv.ParseInt(m[2], 10, 32)
		if err != nil || p < 1 {
			return nil, fmt.Errorf("%q: the priority after ':' must be a whole number, at least 1 (the most preferred)", s)
		}
		slot.Priority = int32(p)
	}
	return slot, nil
}

// absPath expands ~ and makes a path absolute: a kubeconfig path is read by
// the controller, which does not share the shell's working directory.
func absPath(p string) (string, error) {
	if p == "~" || strings.HasPrefix(p, "~/") {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot expand ~: %v; give the absolute path", err)
		}
		p = filepath.Join(home, strings.TrimPrefix(p, "~"))
	}
	return filepath.Abs(p)
}

// flagPath turns accelerators[1].type into --accelerator[1] and labels.k
// into --label k.
func flagPath(field string) string {
	head, rest := field, ""
	if i := strings.IndexAny(field, ".["); i >= 0 {
		head, rest = field[:i], field[i:]
	}
	f, ok := flagOf[head]
	if !ok {
		return field
	}
	switch {
	case head == "accelerators":
		if i := strings.Index(rest, "]"); i >= 0 {
			return f + rest[:i+1]
		}
	case head == "labels":
		return f + " " + strings.TrimPrefix(rest, ".")
	}
	return f + rest
}
