package create

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/manifest"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/validation"
)

// Options are the inputs of `falcon exp create`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	// Filename is the manifest (-f); "-" is stdin.
	Filename string

	// The flag form.
	Name       string
	Cluster    string
	ExpType    string
	TasksFile  string
	ConfigFile string
	Priority   int32
	Tags       []string

	// TTL, when set (TTLSet), overrides the manifest's ttl; it combines
	// with either form.
	TTL    time.Duration
	TTLSet bool

	// GenerateName adds a random suffix to the name, so a manifest can be
	// run again without editing it.
	GenerateName bool
	// Suffix makes the suffix (tests fix it); nil means random.
	Suffix func() string
}

// generateAttempts bounds the retries of --generate-name when a suffix
// happens to be taken (one in 36^5 per existing sibling).
const generateAttempts = 3

// flagForm are the flags of the flag form; none may be combined with -f.
var flagForm = []string{"name", "cluster", "type", "role-to-task-spec", "config", "priority", "tag"}

// NewCmdCreate builds the command. runF replaces createRun in tests.
func NewCmdCreate(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:   "create {-f FILE | --name NAME --cluster CLUSTER --type TYPE --role-to-task-spec FILE [flags]}",
		Short: "Create an experiment from a manifest or from flags",
		Long: `Create an experiment.

Either from a manifest (-f FILE, or -f - for stdin) holding every field, or
from the flag form: --name, --cluster, --type and --role-to-task-spec (a YAML
file mapping role names to task specs), with --config (a file whose text is
stored verbatim and handed to the job as CUSTOM_CONFIG_KEY), --priority and
--tag. The two forms cannot be mixed: put the fields in the manifest instead.

Names are unique. --generate-name makes the name the manifest's (or
--name's) followed by a dash and five random letters and digits, as
Kubernetes' generateName does, so the same manifest can run again
unchanged; find the runs with falcon exp list --name 'NAME-*'.`,
		Example: `  falcon exp create -f manifest.yaml
  falcon exp create -f manifest.yaml --generate-name -o json --jq .id
  falcon exp create --name bench-3 --cluster v7x-east --type benchmark \
      --role-to-task-spec tasks.yaml --config cfg.yaml --tag nightly`,
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
				return errdefs.Invalid(set[0], "cannot be combined with -f/--filename; put the field in the manifest instead")
			case opts.Filename == "" && len(set) == 0:
				return errdefs.Invalid("-f/--filename", "required: give a manifest with -f FILE, or use the flag form (--name, --cluster, --type, --role-to-task-spec)")
			case opts.Filename == "" && opts.TasksFile == "":
				return errdefs.Invalid("--role-to-task-spec", "required with the flag form (%s given): a YAML file mapping role names to task specs", strings.Join(set, ", "))
			}
			if opts.TTLSet = cmd.Flags().Changed("ttl"); opts.TTLSet && opts.TTL <= 0 {
				return errdefs.Invalid("--ttl", "must be a positive duration such as 2h or 30m, got %s", opts.TTL)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return createRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&opts.Filename, "filename", "f", "", "Experiment manifest (YAML or JSON); - reads stdin")
	fl.StringVar(&opts.Name, "name", "", "Flag form: experiment name")
	fl.StringVar(&opts.Cluster, "cluster", "", "Flag form: cluster to run on")
	fl.StringVar(&opts.ExpType, "type", "", "Flag form: experiment type (profiling, training, benchmark, ...)")
	fl.StringVar(&opts.TasksFile, "role-to-task-spec", "", "Flag form: YAML file mapping role names to task specs")
	fl.StringVar(&opts.ConfigFile, "config", "", "Flag form: config file, stored verbatim (CUSTOM_CONFIG_KEY)")
	fl.Int32Var(&opts.Priority, "priority", 0, "Flag form: priority")
	fl.StringSliceVar(&opts.Tags, "tag", nil, "Flag form: tag (repeatable)")
	fl.BoolVar(&opts.GenerateName, "generate-name", false, "Append -XXXXX (random) to the name, so reruns need no new name")
	fl.DurationVar(&opts.TTL, "ttl", 0, "Stop the experiment this long after it starts running, e.g. 2h (overrides the manifest's ttl; falcon exp extend adds time)")
	return cmd
}

func createRun(ctx context.Context, opts *Options) error {
	exp, err := Experiment(opts)
	if err != nil {
		return err
	}
	c, err := opts.Client()
	if err != nil {
		return err
	}
	if opts.TTLSet {
		exp.Ttl = durationpb.New(opts.TTL)
	}
	base := exp.GetName()
	var created *falconv1.Experiment
	for attempt := 1; ; attempt++ {
		if opts.GenerateName {
			exp.Name = GeneratedName(base, opts.suffix())
		}
		created, err = c.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: exp})
		if err == nil {
			break
		}
		if !opts.GenerateName || errdefs.Code(err) != codes.AlreadyExists || attempt == generateAttempts {
			return err
		}
	}
	return opts.Printer().Print(created, func(v output.View) error {
		where := ""
		if c := created.GetClusterName(); c != "" {
			where = " on cluster " + c
		}
		fmt.Fprintf(v.Out, "Created experiment %s %q%s (%s)\n", created.GetId(), created.GetName(), where, created.GetStatus())
		if created.GetInteractive() {
			fmt.Fprintf(v.Notes, "Get into it with `falcon exp exec %[1]s -it -- bash` once it runs; it stops when its ttl ends (`falcon exp extend %[1]s --ttl 1h` for more).\n", created.GetId())
		} else {
			fmt.Fprintf(v.Notes, "Follow it with `falcon exp logs %[1]s -f`, or wait for it with `falcon exp wait %[1]s`.\n", created.GetId())
		}
		return nil
	})
}

func (opts *Options) suffix() string {
	if opts.Suffix != nil {
		return opts.Suffix()
	}
	return ids.New("")[:5]
}

// GeneratedName is base-suffix, base cut so the whole stays a DNS label of
// at most validation.MaxNameLen characters; an empty base is "exp".
func GeneratedName(base, suffix string) string {
	if base == "" {
		base = "exp"
	}
	if room := validation.MaxNameLen - len(suffix) - 1; len(base) > room {
		base = strings.TrimRight(base[:room], "-")
	}
	return base + "-" + suffix
}

// Experiment builds the experiment to create from a manifest or the flag
// form. Errors are InvalidArgument and name the file or flag at fault.
func Experiment(opts *Options) (*falconv1.Experiment, error) {
	if opts.Filename != "" {
		data, err := factory.ReadFlagFile(opts.IO, "--filename", opts.Filename)
		if err != nil {
			return nil, err
		}
		exp, err := manifest.Parse(data)
		if err != nil {
			return nil, factory.InFile(opts.Filename, err)
		}
		return exp, nil
	}
	data, err := factory.ReadFlagFile(opts.IO, "--role-to-task-spec", opts.TasksFile)
	if err != nil {
		return nil, err
	}
	roles, err := manifest.ParseTasks(data)
	if err != nil {
		return nil, factory.InFile(opts.TasksFile, err)
	}
	exp := &falconv1.Experiment{
		Name:           opts.Name,
		ClusterName:    opts.Cluster,
		ExpType:        opts.ExpType,
		Priority:       opts.Priority,
		Tags:           opts.Tags,
		RoleToTaskSpec: roles,
	}
	if opts.ConfigFile != "" {
		cfg, err := factory.ReadFlagFile(opts.IO, "--config", opts.ConfigFile)
		if err != nil {
			return nil, err
		}
		exp.Config = string(cfg)
	}
	return exp, nil
}
