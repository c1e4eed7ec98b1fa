package cli

import (
	"context"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
)

// expArgs says which positional arguments of a command name experiments:
// every one, or only the first (the rest are paths, report IDs or the
// command to exec). They are the arguments that may be an experiment's name
// instead of its ID (the root resolves them before the command runs), and
// that shell completion offers experiments for.
var expArgs = map[string]argKind{
	"falcon exp get":          allArgs,
	"falcon exp abort":        allArgs,
	"falcon exp delete":       allArgs,
	"falcon exp wait":         allArgs,
	"falcon exp events":       allArgs,
	"falcon exp logs":         allArgs,
	"falcon exp logs export":  allArgs,
	"falcon exp metrics":      allArgs,
	"falcon exp extend":       allArgs,
	"falcon exp diff":         allArgs,
	"falcon exp compare":      allArgs,
	"falcon exp explain":      allArgs,
	"falcon exp exec":         firstArg,
	"falcon exp cp":           copyArgs,
	"falcon artifact ls":      firstArg,
	"falcon artifact cat":     firstArg,
	"falcon artifact get":     firstArg,
	"falcon analyze profile":  allArgs,
	"falcon analyze compare":  allArgs,
	"falcon analyze accuracy": allArgs,
	"falcon report ls":        firstArg,
	"falcon report cat":       firstArg,
}

// expFlags are the flags that name an experiment, wherever they appear.
var expFlags = []string{"exp"}

type argKind int

const (
	allArgs argKind = iota + 1
	firstArg
	// copyArgs: EXP:PATH on either side of exp cp (see remoteArg).
	copyArgs
)

// isExpArg reports whether argument i of cmd names an experiment.
func isExpArg(cmd *cobra.Command, i int) bool {
	switch expArgs[cmd.CommandPath()] {
	case allArgs:
		return true
	case firstArg:
		return i == 0
	}
	return false
}

// resolveExpNames replaces, in place, each experiment argument (and --exp)
// that is not an ID by the ID of the experiment of that name. args is the
// slice cobra hands to the command's RunE too, so the command sees IDs
// only. An ID costs no call; each name one.
func resolveExpNames(ctx context.Context, cmd *cobra.Command, args []string, f *factory.Factory) error {
	kind := expArgs[cmd.CommandPath()]
	for i, a := range args {
		if cmd.ArgsLenAtDash() >= 0 && i >= cmd.ArgsLenAtDash() {
			break // exec's command line
		}
		switch {
		case kind == copyArgs:
			if !remoteArg(a) {
				continue
			}
			name, path, _ := strings.Cut(a, ":")
			id, err := resolveExp(ctx, f, name, "argument "+a)
			if errdefs.Code(err) == codes.NotFound {
				return errdefs.NotFoundf("%v; a local path with a colon before any slash is written ./%s", err, a)
			}
			if err != nil {
				return err
			}
			args[i] = id + ":" + path
		case isExpArg(cmd, i):
			id, err := resolveExp(ctx, f, a, "argument "+a)
			if err != nil {
				return err
			}
			args[i] = id
		}
	}
	for _, name := range expFlags {
		fl := cmd.Flags().Lookup(name)
		if fl == nil || !fl.Changed || fl.Value.Type() != "string" {
			continue
		}
		id, err := resolveExp(ctx, f, fl.Value.String(), "--"+name)
		if err != nil {
			return err
		}
		if err := fl.Value.Set(id); err != nil {
			return err
		}
	}
	return nil
}

// remoteArg reports whether an argument of exp cp names a rank's path,
// as scp and kubectl cp read theirs: NAME:PATH, with no slash before the
// colon, the path absolute or relative to the rank's working directory.
// A local file that exists under the whole argument stays local.
func remoteArg(a string) bool {
	name, _, ok := strings.Cut(a, ":")
	if !ok || name == "" || strings.Contains(name, "/") {
		return false
	}
	_, err := os.Lstat(a)
	return err != nil
}

// resolveExp is the ID of the experiment ref names: ref itself when it is
// an ID, else the experiment of that name (names are unique).
func resolveExp(ctx context.Context, f *factory.Factory, ref, what string) (string, error) {
	if ids.Valid(ids.Experiment, ref) || ref == "" {
		return ref, nil
	}
	if strings.Contains(ref, "*") {
		return "", errdefs.Invalid(what, "%q: name one experiment, by ID or by its whole name (falcon exp list --name '%s' lists those that match)", ref, ref)
	}
	c, err := f.Client()
	if err != nil {
		return "", err
	}
	resp, err := c.ListExps(ctx, &falconv1.ListExpsRequest{Name: ref, PageSize: 1})
	if err != nil {
		return "", err
	}
	if len(resp.GetItems()) == 0 {
		if strings.HasPrefix(ref, ids.Experiment) {
			// Meant as an ID, mistyped: the server's answer names it.
			return ref, nil
		}
		return "", errdefs.NotFoundf("no experiment is named %q, and it is no experiment ID (those look like exp-q7odgo8q9x); falcon exp list --name '%s*' lists names that start so", ref, ref)
	}
	return resp.GetItems()[0].GetId(), nil
}
