package list

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/output"
)

// Options are the inputs of `falcon audit list`.
type Options struct {
	IO      *iostreams.IOStreams
	Client  func() (*client.Client, error)
	Printer func() *output.Printer

	Limit     int32
	ExpID     string
	Actor     string
	Method    string
	PageToken string
}

// NewCmdList builds the command. runF replaces listRun in tests.
func NewCmdList(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Printer: f.Printer}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List audit events",
		Long: `List the audit log, newest first, one page at a time: every mutating call
(create, abort, delete, cluster writes, relinks), who made it, on what, and
how it ended ("ok", or the refusal's code such as PermissionDenied).

Calls refused before authentication (no token, or one that does not
verify) are counted instead of listed: one event of the method
"unauthenticated" per source address and reason per minute, whose COUNT
says how many calls it stands for and whose ACTOR is the source. Past 1000
distinct sources and reasons in a minute, the rest are counted under the
source "other". --method unauthenticated lists only those.

Only admins may read it. --actor takes an email, or a user_id for service
tokens, which have no email. --method takes a method's name (AbortExp).
When more results exist, table output says which --page-token to pass;
JSON output carries it as next_page_token.`,
		Example: `  falcon audit list --exp exp-q7odgo8q9x
  falcon audit list --actor alice@example.com --limit 20 -o json
  falcon audit list --method ApplyClusters
  falcon audit list --method unauthenticated`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := factory.CheckLimit(opts.Limit); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return listRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	factory.AddPageFlags(fl, &opts.Limit, &opts.PageToken, "events")
	fl.StringVar(&opts.ExpID, "exp", "", "Only events on this experiment (ID)")
	fl.StringVar(&opts.Actor, "actor", "", "Only events by this caller (email, or user_id)")
	fl.StringVar(&opts.Method, "method", "", "Only calls of this method (e.g. AbortExp)")
	return cmd
}

func listRun(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	resp, err := c.ListAuditEvents(ctx, &falconv1.ListAuditEventsRequest{
		PageSize:  opts.Limit,
		PageToken: opts.PageToken,
		ExpId:     opts.ExpID,
		Actor:     opts.Actor,
		Method:    opts.Method,
	})
	if err != nil {
		return err
	}
	return opts.Printer().Print(resp, table(resp))
}

// table is the human view: one event a line. It lives here rather than in
// output because no other command shows audit events.
func table(resp *falconv1.ListAuditEventsResponse) output.TableFunc {
	return func(v output.View) error {
		if len(resp.GetItems()) == 0 {
			_, err := fmt.Fprintln(v.Notes, "No audit events found.")
			return err
		}
		cols := []output.Column[*falconv1.AuditEvent]{
			{Header: "AGE", Value: func(e *falconv1.AuditEvent) string { return output.Age(v.Now, e.GetAt()) }},
			{Header: "ACTOR", Value: func(e *falconv1.AuditEvent) string {
				switch {
				case e.GetActorEmail() != "":
					return e.GetActorEmail()
				case e.GetActorId() != "":
					return e.GetActorId()
				}
				// Refused before authentication: no actor, only where
				// the calls came from.
				return e.GetSource()
			}},
			{Header: "METHOD", Value: func(e *falconv1.AuditEvent) string {
				return e.GetMethod()[strings.LastIndex(e.GetMethod(), "/")+1:]
			}},
			{Header: "TARGET", Value: func(e *falconv1.AuditEvent) string { return e.GetTargetId() }},
			{Header: "OUTCOME", Value: func(e *falconv1.AuditEvent) string { return e.GetOutcome() }},
			{Header: "COUNT", Value: func(e *falconv1.AuditEvent) string { return strconv.FormatInt(max(e.GetCount(), 1), 10) }},
			{Header: "DETAIL", Value: func(e *falconv1.AuditEvent) string { return e.GetDetail() }},
		}
		if err := output.WriteTable(v.Out, cols, resp.GetItems()); err != nil {
			return err
		}
		if next := resp.GetNextPageToken(); next != "" {
			fmt.Fprintf(v.Notes, "More audit events: repeat with --page-token %s\n", next)
		}
		return nil
	}
}
