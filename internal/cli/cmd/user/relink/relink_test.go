package relink

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

func TestNewCmdRelinkFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		want    Options
		wantErr string
	}{
		{name: "email and sub", args: []string{"ada@example.com", "--sub", "0b8a6c1e"}, want: Options{Email: "ada@example.com", Sub: "0b8a6c1e"}},
		{name: "spaces trimmed", args: []string{" ada@example.com ", "--sub", " 0b8a6c1e\n"}, want: Options{Email: "ada@example.com", Sub: "0b8a6c1e"}},
		{name: "no sub", args: []string{"ada@example.com"}, wantErr: "--sub: is required"},
		{name: "empty sub", args: []string{"ada@example.com", "--sub", " "}, wantErr: "--sub: is required"},
		{name: "empty email", args: []string{" ", "--sub", "s"}, wantErr: "EMAIL: is required"},
		{name: "no email", args: []string{"--sub", "s"}, wantErr: "accepts 1 arg(s)"},
		{name: "two emails", args: []string{"a@example.com", "b@example.com", "--sub", "s"}, wantErr: "accepts 1 arg(s)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, _ := clitest.NewFactory(t, clitest.DownURL(t), output.JSON)
			var got *Options
			err := clitest.Execute(NewCmdRelink(f, func(_ context.Context, o *Options) error { got = o; return nil }), tt.args...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				if got != nil {
					t.Error("ran despite the bad input")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, Options{Email: got.Email, Sub: got.Sub}); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
		})
	}
}

const admin = "root@example.com"

// cfServer is a real API server verifying Cloudflare Access tokens, with
// one admin, and a way to run commands as the holder of a token.
type cfServer struct {
	*apitest.Env
	iss *authtest.Issuer
}

func startCF(t *testing.T) *cfServer {
	t.Helper()
	iss := authtest.NewIssuer(t)
	cf, err := auth.NewCloudflareAccess(context.Background(), iss.Config())
	if err != nil {
		t.Fatal(err)
	}
	env := apitest.Start(t, map[string]string{"local": "local"}, apiserver.WithAuthenticator(cf), apiserver.WithAdmins(auth.NewAdmins(admin)))
	return &cfServer{Env: env, iss: iss}
}

// factory is a command factory whose client presents tok.
func (s *cfServer) factory(t *testing.T, tok string, format output.Format) (*factory.Factory, *clitest.Streams) {
	t.Helper()
	f, streams := clitest.NewFactory(t, "http://"+s.HTTPAddr, format)
	c, err := client.New("http://"+s.HTTPAddr, client.WithToken(func(context.Context) (string, error) { return tok, nil }))
	if err != nil {
		t.Fatal(err)
	}
	f.Client = func() (*client.Client, error) { return c, nil }
	return f, streams
}

func (s *cfServer) withSub(email, sub string) string {
	c := s.iss.UserClaims(email)
	c["sub"] = sub
	return authtest.Sign(s.iss.Key(), c)
}

func as(tok string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
}

// The whole story through the command: a recreated identity is locked
// out, a non-admin cannot relink, a sub another user has is refused, the
// admin relinks, and the user is back with their experiment.
func TestRelinkThroughTheServer(t *testing.T) {
	s := startCF(t)
	oldAda, newAda := s.iss.Token("ada@example.com"), s.withSub("ada@example.com", "sub-ada-recreated")
	bob, root := s.iss.Token("bob@example.com"), s.iss.Token(admin)
	exps := falconv1.NewExperimentServiceClient(s.UserConn)
	x, err := exps.CreateExp(as(oldAda), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: "adas", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := falconv1.NewUserServiceClient(s.UserConn).GetCurrentUser(as(bob), &falconv1.GetCurrentUserRequest{}); err != nil {
		t.Fatal(err)
	}
	_, err = exps.ListExps(as(newAda), &falconv1.ListExpsRequest{})
	fix := "falcon user relink ada@example.com --sub sub-ada-recreated"
	if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), fix) {
		t.Fatalf("locked out: %v; want the fix %q", err, fix)
	}
	args := strings.Fields(fix)[3:] // after "falcon user relink"

	t.Run("not an admin", func(t *testing.T) {
		f, out := s.factory(t, bob, output.Table)
		err := clitest.Execute(NewCmdRelink(f, nil), args...)
		if code := errdefs.Code(err); code != codes.PermissionDenied || errdefs.ExitCode(code) != errdefs.ExitAuth || !strings.Contains(err.Error(), "an admin is required") {
			t.Errorf("bob: %v (exit %d); want PermissionDenied, exit 5", err, errdefs.ExitCode(code))
		}
		if out.Out.String() != "" {
			t.Errorf("printed %q", out.Out)
		}
	})

	t.Run("sub of another user", func(t *testing.T) {
		f, _ := s.factory(t, root, output.Table)
		err := clitest.Execute(NewCmdRelink(f, nil), "ada@example.com", "--sub", "sub-bob@example.com")
		if code := errdefs.Code(err); code != codes.AlreadyExists || errdefs.ExitCode(code) != errdefs.ExitPrecondition ||
			!strings.Contains(err.Error(), `sub: "sub-bob@example.com" is already the identity of bob@example.com`) {
			t.Errorf("relink to bob's sub: %v (exit %d); want AlreadyExists, exit 4, naming sub and bob", err, errdefs.ExitCode(code))
		}
		if _, err := exps.ListExps(as(newAda), &falconv1.ListExpsRequest{}); status.Code(err) != codes.PermissionDenied {
			t.Errorf("ada after the refused relink: %v; want still locked out", err)
		}
	})

	t.Run("unknown email", func(t *testing.T) {
		f, _ := s.factory(t, root, output.Table)
		err := clitest.Execute(NewCmdRelink(f, nil), "eve@example.com", "--sub", "s")
		if code := errdefs.Code(err); errdefs.ExitCode(code) != errdefs.ExitNotFound || !strings.Contains(err.Error(), "email: no user is registered with eve@example.com") {
			t.Errorf("unknown email: %v (exit %d); want exit 3 naming email", err, errdefs.ExitCode(code))
		}
	})

	t.Run("the admin relinks", func(t *testing.T) {
		f, out := s.factory(t, root, output.Table)
		if err := clitest.Execute(NewCmdRelink(f, nil), args...); err != nil {
			t.Fatal(err)
		}
		if got, want := out.Out.String(), "Relinked ada@example.com: sub-ada@example.com -> sub-ada-recreated, 1 experiments moved\n"; got != want {
			t.Errorf("stdout %q, want %q", got, want)
		}
		got, err := exps.GetExp(as(newAda), &falconv1.GetExpRequest{Id: x.GetId()})
		if err != nil || got.GetCreatorId() != "sub-ada-recreated" {
			t.Fatalf("ada's experiment after the relink: %v, %v", got, err)
		}
		if _, err := exps.AbortExp(as(newAda), &falconv1.AbortExpRequest{Id: x.GetId()}); err != nil {
			t.Errorf("ada aborting her experiment: %v", err)
		}
	})

	t.Run("again, as JSON", func(t *testing.T) {
		f, out := s.factory(t, root, output.JSON)
		if err := clitest.Execute(NewCmdRelink(f, nil), args...); err != nil {
			t.Fatal(err)
		}
		var got struct {
			User struct {
				UserID string `json:"user_id"`
				Email  string `json:"email"`
			} `json:"user"`
			Previous    string `json:"previous_user_id"`
			Experiments string `json:"experiments"`
			Changed     bool   `json:"changed"`
		}
		if err := json.Unmarshal(out.Out.Bytes(), &got); err != nil {
			t.Fatalf("%v: %s", err, out.Out)
		}
		if got.Changed || got.User.UserID != "sub-ada-recreated" || got.Previous != "sub-ada-recreated" || got.Experiments != "0" {
			t.Errorf("relink again: %s; want nothing changed", out.Out)
		}
	})
}
