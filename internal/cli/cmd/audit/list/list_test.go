package list

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"sigs.k8s.io/yaml"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

func TestNewCmdListFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Options
		wantErr string
	}{
		{name: "no filters", args: nil},
		{name: "every filter", args: []string{"--exp", "exp-q7odgo8q9x", "--actor", "alice@example.com", "--method", "AbortExp", "--limit", "5", "--page-token", "t"},
			want: Options{ExpID: "exp-q7odgo8q9x", Actor: "alice@example.com", Method: "AbortExp", Limit: 5, PageToken: "t"}},
		{name: "short limit", args: []string{"-L", "2"}, want: Options{Limit: 2}},
		{name: "negative limit", args: []string{"--limit", "-1"}, wantErr: "--limit: must not be negative"},
		{name: "positional", args: []string{"exp-q7odgo8q9x"}, wantErr: "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := clitest.NewFactory(t, clitest.DownURL(t), output.JSON)
			var got *Options
			err := clitest.Execute(NewCmdList(f, func(_ context.Context, o *Options) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if got != nil {
					t.Error("ran despite the bad flag")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			g := Options{Limit: got.Limit, ExpID: got.ExpID, Actor: got.Actor, Method: got.Method, PageToken: got.PageToken}
			if diff := cmp.Diff(tt.want, g); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

// Against a real API server whose local user is its admin, as in falcon dev.
func TestListPrintsTheLog(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	exp := env.Create(t, "audited", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	env.Create(t, "other", map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}})
	if _, err := env.Exps.AbortExp(context.Background(), &falconv1.AbortExpRequest{Id: exp.GetId()}); err != nil {
		t.Fatal(err)
	}
	url := "http://" + env.HTTPAddr
	me := auth.LocalUser().Email

	t.Run("json", func(t *testing.T) {
		f, s := clitest.NewFactory(t, url, output.JSON)
		if err := clitest.Execute(NewCmdList(f, nil), "--exp", exp.GetId(), "--actor", me, "--limit", "1"); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Items []struct {
				ActorEmail string `json:"actor_email"`
				Method     string `json:"method"`
				TargetID   string `json:"target_id"`
				Outcome    string `json:"outcome"`
				At         string `json:"at"`
			} `json:"items"`
			Next string `json:"next_page_token"`
		}
		if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Items) != 1 || got.Next == "" {
			t.Fatalf("json = %s; want one event and a next page", s.Out)
		}
		if ev := got.Items[0]; ev.ActorEmail != me || ev.Method != "/falcon.v1.ExperimentService/AbortExp" || ev.TargetID != exp.GetId() || ev.Outcome != "ok" || ev.At == "" {
			t.Errorf("newest event %+v; want the abort", ev)
		}

		f, s = clitest.NewFactory(t, url, output.JSON)
		if err := clitest.Execute(NewCmdList(f, nil), "--exp", exp.GetId(), "--page-token", got.Next); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(s.Out.String(), "/falcon.v1.ExperimentService/CreateExp") || strings.Contains(s.Out.String(), "AbortExp") {
			t.Errorf("second page = %s; want the create only", s.Out)
		}
	})

	t.Run("yaml", func(t *testing.T) {
		f, s := clitest.NewFactory(t, url, output.YAML)
		if err := clitest.Execute(NewCmdList(f, nil), "--method", "CreateExp"); err != nil {
			t.Fatal(err)
		}
		var got struct {
			Items []map[string]any `json:"items"`
		}
		if err := yaml.Unmarshal(s.Out.Bytes(), &got); err != nil || len(got.Items) != 2 {
			t.Errorf("yaml = %s (%v); want the two creates", s.Out, err)
		}
	})

	t.Run("table", func(t *testing.T) {
		f, s := clitest.NewFactory(t, url, output.Table)
		if err := clitest.Execute(NewCmdList(f, nil), "--exp", exp.GetId(), "-L", "1"); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(s.Out.String()), "\n")
		if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "AGE ACTOR METHOD TARGET OUTCOME COUNT DETAIL" {
			t.Fatalf("table = %q", s.Out)
		}
		if f := strings.Fields(lines[1]); f[1] != me || f[2] != "AbortExp" || f[3] != exp.GetId() || f[4] != "ok" || f[5] != "1" {
			t.Errorf("first row %q", lines[1])
		}
		if !strings.Contains(s.ErrOut.String(), "More audit events: repeat with --page-token ") {
			t.Errorf("stderr = %q, want the next page hint", s.ErrOut)
		}

		f, s = clitest.NewFactory(t, url, output.Table)
		if err := clitest.Execute(NewCmdList(f, nil), "--actor", "nobody@example.com"); err != nil {
			t.Fatal(err)
		}
		if s.Out.String() != "" || s.ErrOut.String() != "No audit events found.\n" {
			t.Errorf("empty: out %q, notes %q", s.Out, s.ErrOut)
		}
	})

	t.Run("refused before authentication", func(t *testing.T) {
		if err := env.Store.AppendAudit(context.Background(), store.AuditEntry{Method: store.AuditUnauthenticated, Outcome: "Unauthenticated",
			Source: "203.0.113.9", Count: 42, Detail: "malformed token; methods: ListExps"}); err != nil {
			t.Fatal(err)
		}
		f, s := clitest.NewFactory(t, url, output.Table)
		if err := clitest.Execute(NewCmdList(f, nil), "--method", "unauthenticated"); err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(strings.TrimSpace(s.Out.String()), "\n")
		if f := strings.Fields(lines[len(lines)-1]); len(lines) != 2 || f[1] != "203.0.113.9" || f[2] != "unauthenticated" || f[3] != "-" || f[4] != "Unauthenticated" || f[5] != "42" {
			t.Errorf("table = %q", s.Out)
		}
		f, s = clitest.NewFactory(t, url, output.JSON)
		if err := clitest.Execute(NewCmdList(f, nil), "--method", "unauthenticated"); err != nil {
			t.Fatal(err)
		}
		if out := s.Out.String(); !strings.Contains(out, `"count": "42"`) || !strings.Contains(out, `"source": "203.0.113.9"`) {
			t.Errorf("json = %s", out)
		}
	})

	t.Run("bad method", func(t *testing.T) {
		f, _ := clitest.NewFactory(t, url, output.JSON)
		err := clitest.Execute(NewCmdList(f, nil), "--method", "GetExp")
		if errdefs.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "method: \"GetExp\" is not an audited method") {
			t.Errorf("error = %v, want InvalidArgument naming method", err)
		}
	})
}

// someone is a fixed, authenticated user who is not an admin.
type someone struct{}

func (someone) Authenticate(context.Context, map[string][]string) (auth.Principal, error) {
	return auth.Principal{UserID: "u-bob", Email: "bob@example.com", Kind: auth.KindUser}, nil
}

func TestListRefusedToNonAdmins(t *testing.T) {
	env := apitest.Start(t, nil, apiserver.WithAuthenticator(someone{}))
	f, s := clitest.NewFactory(t, "http://"+env.HTTPAddr, output.Table)
	err := clitest.Execute(NewCmdList(f, nil))
	if errdefs.Code(err) != codes.PermissionDenied || errdefs.ExitCode(errdefs.Code(err)) != errdefs.ExitAuth ||
		!strings.Contains(err.Error(), "an admin is required") {
		t.Errorf("error = %v (exit %d), want PermissionDenied (exit 5) saying an admin is required", err, errdefs.ExitCode(errdefs.Code(err)))
	}
	if s.Out.String() != "" {
		t.Errorf("printed %q", s.Out)
	}
}
