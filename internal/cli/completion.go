package cli

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/output"
)

// Shell completion (`falcon completion bash|zsh|fish|powershell` prints the
// script) is cobra's dynamic completion: the shell runs `falcon __complete
// ...` and these functions answer from the API server, so an ID completes
// to the experiments and jobs that exist. One call each, bounded by
// completeTimeout: a shell that waits longer than that feels broken, and an
// unreachable server completes nothing rather than an error.
const completeTimeout = 3 * time.Second

// completeLimit is how many of the newest experiments or jobs are offered.
const completeLimit = 200

type completeFunc = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective)

// addCompletions wires completion into every command of the tree: the
// arguments expArgs names, job and cluster arguments, and the flags that
// take IDs, roles, ranks, clusters, statuses, formats or contexts.
func addCompletions(root *cobra.Command, f *factory.Factory) {
	_ = root.RegisterFlagCompletionFunc("output", fixed(output.FormatNames()...))
	_ = root.RegisterFlagCompletionFunc("color", fixed(output.ColorModes...))
	_ = root.RegisterFlagCompletionFunc("context", contextNames(f))
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		path := c.CommandPath()
		switch {
		case expArgs[path] != 0:
			c.ValidArgsFunction = expArgCompletion(f)
		case path == "falcon job get":
			c.ValidArgsFunction = firstOnly(jobIDs(f))
		case path == "falcon cluster get" || path == "falcon cluster status" || path == "falcon cluster set-status":
			c.ValidArgsFunction = clusterArg(f)
		case path == "falcon config use-context" || path == "falcon config set-context":
			c.ValidArgsFunction = firstOnly(contextNames(f))
		}
		fl := c.LocalFlags()
		for name, fn := range map[string]completeFunc{
			"exp":     experiments(f),
			"role":    roles(f),
			"rank":    ranks(f),
			"cluster": clusterNames(f),
		} {
			if fl.Lookup(name) != nil {
				_ = c.RegisterFlagCompletionFunc(name, fn)
			}
		}
		if fl.Lookup("status") != nil {
			m := lifecycle.ExperimentMachine
			if strings.HasPrefix(path, "falcon job ") {
				m = lifecycle.JobMachine
			}
			var names []string
			for _, s := range m.Statuses() {
				names = append(names, string(s))
			}
			if strings.HasPrefix(path, "falcon cluster ") {
				names = []string{"active", "maintenance", "offline"}
			}
			_ = c.RegisterFlagCompletionFunc("status", fixed(names...))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func fixed(values ...string) completeFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return withPrefix(values, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

func withPrefix(values []string, prefix string) []string {
	out := make([]string, 0, len(values))
	for _, v := range values {
		if strings.HasPrefix(strings.ToLower(v), strings.ToLower(prefix)) {
			out = append(out, v)
		}
	}
	return out
}

func firstOnly(fn completeFunc) completeFunc {
	return func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return fn(c, args, toComplete)
	}
}

func completeCtx(c *cobra.Command) (context.Context, context.CancelFunc) {
	parent := c.Context()
	if parent == nil {
		parent = context.Background()
	}
	return context.WithTimeout(parent, completeTimeout)
}

// expArgCompletion completes the arguments of c that name experiments; the
// others (paths, the command exec runs) are left to the shell.
func expArgCompletion(f *factory.Factory) completeFunc {
	exps := experiments(f)
	return func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if expArgs[c.CommandPath()] == copyArgs {
			if strings.Contains(toComplete, ":") || strings.HasPrefix(toComplete, ".") || strings.HasPrefix(toComplete, "/") {
				return nil, cobra.ShellCompDirectiveDefault
			}
			out, dir := exps(c, args, toComplete)
			for i, o := range out {
				id, desc, _ := strings.Cut(o, "\t")
				out[i] = id + ":/\t" + desc
			}
			return out, dir | cobra.ShellCompDirectiveNoSpace
		}
		if !isExpArg(c, len(args)) {
			return nil, cobra.ShellCompDirectiveDefault
		}
		return exps(c, args, toComplete)
	}
}

// experiments offers the newest experiments: their IDs, described by name
// and status, and, when what is typed is not an ID's start, the names that
// start with it (names work wherever IDs do).
func experiments(f *factory.Factory) completeFunc {
	return func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		cl, err := f.Client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := completeCtx(c)
		defer cancel()
		req := &falconv1.ListExpsRequest{PageSize: completeLimit}
		byName := toComplete != "" && !strings.HasPrefix(ids.Experiment, toComplete) && !strings.HasPrefix(toComplete, ids.Experiment)
		if byName {
			req.Name = toComplete + "*"
		}
		resp, err := cl.ListExps(ctx, req)
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, e := range resp.GetItems() {
			desc := "\t" + strings.TrimSpace(e.GetName()+" "+e.GetStatus())
			switch {
			case byName:
				out = append(out, e.GetName()+"\t"+e.GetId()+" "+e.GetStatus())
			case strings.HasPrefix(e.GetId(), toComplete):
				out = append(out, e.GetId()+desc)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func jobIDs(f *factory.Factory) completeFunc {
	return func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		cl, err := f.Client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := completeCtx(c)
		defer cancel()
		resp, err := cl.ListJobs(ctx, &falconv1.ListJobsRequest{PageSize: completeLimit})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, j := range resp.GetItems() {
			if strings.HasPrefix(j.GetId(), toComplete) {
				out = append(out, j.GetId()+"\t"+j.GetExpName()+" "+j.GetRole()+" "+j.GetStatus())
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func clusterNames(f *factory.Factory) completeFunc {
	return func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		cl, err := f.Client()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		ctx, cancel := completeCtx(c)
		defer cancel()
		resp, err := cl.ListClusters(ctx, &falconv1.ListClustersRequest{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for _, cluster := range resp.GetItems() {
			if strings.HasPrefix(cluster.GetName(), toComplete) {
				out = append(out, cluster.GetName()+"\t"+cluster.GetBackend()+" "+cluster.GetStatus())
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// clusterArg completes a cluster command's NAME, and set-status's state.
func clusterArg(f *factory.Factory) completeFunc {
	names := clusterNames(f)
	return func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		switch {
		case len(args) == 0:
			return names(c, args, toComplete)
		case len(args) == 1 && c.Name() == "set-status":
			return withPrefix([]string{"active", "maintenance", "offline"}, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// expOf reads the experiment a command's first argument names, for the
// roles and ranks of --role and --rank.
func expOf(c *cobra.Command, args []string, f *factory.Factory) (*falconv1.Experiment, bool) {
	if len(args) == 0 {
		return nil, false
	}
	ref := args[0]
	if expArgs[c.CommandPath()] == copyArgs {
		for _, a := range args {
			if remoteArg(a) {
				ref, _, _ = strings.Cut(a, ":")
			}
		}
	}
	ctx, cancel := completeCtx(c)
	defer cancel()
	id, err := resolveExp(ctx, f, ref, "argument")
	if err != nil {
		return nil, false
	}
	cl, err := f.Client()
	if err != nil {
		return nil, false
	}
	exp, err := cl.GetExp(ctx, &falconv1.GetExpRequest{Id: id})
	return exp, err == nil
}

func roles(f *factory.Factory) completeFunc {
	return func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		exp, ok := expOf(c, args, f)
		if !ok {
			return nil, cobra.ShellCompDirectiveError
		}
		var out []string
		for role, spec := range exp.GetRoleToTaskSpec() {
			if strings.HasPrefix(role, toComplete) {
				out = append(out, role+"\t"+strconv.Itoa(int(spec.GetReplica()))+" replicas")
			}
		}
		slices.Sort(out)
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

// ranks offers 0..replica-1 of --role's role (the only role when none).
func ranks(f *factory.Factory) completeFunc {
	return func(c *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		exp, ok := expOf(c, args, f)
		if !ok {
			return nil, cobra.ShellCompDirectiveError
		}
		role, _ := c.Flags().GetString("role")
		var replica int32
		for r, spec := range exp.GetRoleToTaskSpec() {
			if role == "" || r == role {
				replica = max(replica, spec.GetReplica())
			}
		}
		var out []string
		for i := range replica {
			if s := strconv.Itoa(int(i)); strings.HasPrefix(s, toComplete) {
				out = append(out, s)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func contextNames(f *factory.Factory) completeFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		file, err := f.Contexts()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		c, err := file.Load()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for _, n := range withPrefix(c.Names(), toComplete) {
			out = append(out, n+"\t"+c.Contexts[n].Server)
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}
