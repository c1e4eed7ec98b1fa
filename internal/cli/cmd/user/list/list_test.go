package list

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"sigs.k8s.io/yaml"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

func TestNewCmdListFlags(t *testing.T) {
	f, _ := clitest.NewFactory(t, clitest.DownURL(t), output.JSON)
	ran := false
	if err := clitest.Execute(NewCmdList(f, func(context.Context, *Options) error { ran = true; return nil })); err != nil || !ran {
		t.Errorf("no arguments: %v, ran %v", err, ran)
	}
	err := clitest.Execute(NewCmdList(f, func(context.Context, *Options) error { t.Error("ran"); return nil }), "ada@example.com")
	if err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Errorf("positional: %v", err)
	}
}

// Against a real API server verifying Cloudflare Access tokens, whose
// admins are root by email and a group.
func TestListThroughTheServer(t *testing.T) {
	const admin = "root@example.com"
	iss := authtest.NewIssuer(t)
	cf, err := auth.NewCloudflareAccess(context.Background(), iss.Config())
	if err != nil {
		t.Fatal(err)
	}
	env := apitest.Start(t, nil, apiserver.WithAuthenticator(cf), apiserver.WithAdmins(auth.NewAdmins(admin, "group:falcon-admins")))
	svc := authtest.Sign(iss.Key(), iss.ServiceClaims("ci-bot.access"))
	for _, tok := range []string{iss.Token("bob@example.com"), iss.Token(admin), svc} {
		ctx := metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
		if _, err := falconv1.NewUserServiceClient(env.UserConn).GetCurrentUser(ctx, &falconv1.GetCurrentUserRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	run := func(t *testing.T, tok string, format output.Format) (*clitest.Streams, error) {
		t.Helper()
		f, s := clitest.NewFactory(t, "http://"+env.HTTPAddr, format)
		c, err := client.New("http://"+env.HTTPAddr, client.WithToken(func(context.Context) (string, error) { return tok, nil }))
		if err != nil {
			t.Fatal(err)
		}
		f.Client = func() (*client.Client, error) { return c, nil }
		return s, clitest.Execute(NewCmdList(f, nil))
	}

	t.Run("table", func(t *testing.T) {
		s, err := run(t, iss.Token(admin), output.Table)
		if err != nil {
			t.Fatal(err)
		}
		var rows [][]string
		for _, l := range strings.Split(strings.TrimSpace(s.Out.String()), "\n") {
			rows = append(rows, strings.Fields(l))
		}
		want := [][]string{
			{"USER_ID", "EMAIL", "ADMIN", "REGISTERED"},
			{"service:ci-bot.access", "-", "no", "0s"},
			{"sub-bob@example.com", "bob@example.com", "no", "0s"},
			{"sub-root@example.com", "root@example.com", "yes", "0s"},
		}
		// Registered "now" by the server's clock, shown against the test's.
		for _, r := range rows[1:] {
			r[3] = "0s"
		}
		if diff := cmp.Diff(want, rows); diff != "" {
			t.Errorf("table (-want +got):\n%s", diff)
		}
		if !strings.Contains(s.ErrOut.String(), "also names admins by group") {
			t.Errorf("notes %q, want the group caveat", s.ErrOut)
		}
	})

	t.Run("json", func(t *testing.T) {
		s, err := run(t, iss.Token(admin), output.JSON)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Items []struct {
				UserID    string `json:"user_id"`
				Email     string `json:"email"`
				Admin     bool   `json:"admin"`
				CreatedAt string `json:"created_at"`
			} `json:"items"`
			AdminsByGroup bool `json:"admins_by_group"`
		}
		if err := json.Unmarshal(s.Out.Bytes(), &got); err != nil {
			t.Fatalf("%v: %s", err, s.Out)
		}
		if len(got.Items) != 3 || !got.AdminsByGroup || !got.Items[2].Admin || got.Items[2].Email != admin || got.Items[0].CreatedAt == "" {
			t.Errorf("json = %s", s.Out)
		}
	})

	t.Run("yaml", func(t *testing.T) {
		s, err := run(t, iss.Token(admin), output.YAML)
		var got struct {
			Items []map[string]any `json:"items"`
		}
		if err != nil || yaml.Unmarshal(s.Out.Bytes(), &got) != nil || len(got.Items) != 3 {
			t.Errorf("yaml = %s (%v)", s.Out, err)
		}
	})

	t.Run("not an admin", func(t *testing.T) {
		s, err := run(t, iss.Token("bob@example.com"), output.Table)
		if code := errdefs.Code(err); code != codes.PermissionDenied || errdefs.ExitCode(code) != errdefs.ExitAuth || !strings.Contains(err.Error(), "an admin is required") {
			t.Errorf("bob: %v; want PermissionDenied (exit 5)", err)
		}
		if s.Out.String() != "" {
			t.Errorf("printed %q", s.Out)
		}
	})
}
