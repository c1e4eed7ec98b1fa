package cli

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

func invokeEnv(env map[string]string, args ...string) result {
	ios, _, out, errOut := iostreams.Test()
	code := run(context.Background(), args, ios, func(k string) string { return env[k] })
	return result{code, out.String(), errOut.String()}
}

// tokenAPI answers ListExps, recording the Authorization each call carried,
// and refuses GetExp as a server refuses a token.
type tokenAPI struct {
	*clitest.API
	mu   sync.Mutex
	seen []string
}

func newTokenAPI() *tokenAPI {
	a := &tokenAPI{}
	a.API = &clitest.API{
		ListExpsFunc: func(ctx context.Context, _ *falconv1.ListExpsRequest) (*falconv1.ListExpsResponse, error) {
			md, _ := metadata.FromIncomingContext(ctx)
			a.mu.Lock()
			a.seen = append(a.seen, strings.Join(md.Get("authorization"), ","))
			a.mu.Unlock()
			return &falconv1.ListExpsResponse{}, nil
		},
		GetExpFunc: func(context.Context, *falconv1.GetExpRequest) (*falconv1.Experiment, error) {
			return nil, status.Error(codes.Unauthenticated, "token expired at 2026-01-01T00:00:00Z")
		},
	}
	return a
}

func (a *tokenAPI) calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.seen...)
}

func TestTokensAreAttachedAndExpiryChecked(t *testing.T) {
	api := newTokenAPI()
	url := clitest.Start(t, api.API)
	iss := authtest.NewIssuer(t)
	live := iss.Token("alice@example.com")
	dead := func() string {
		c := iss.UserClaims("alice@example.com")
		c["exp"] = time.Now().Add(-time.Minute).Unix()
		return authtest.Sign(iss.Key(), c)
	}()
	dir := t.TempDir()
	store := &credentials.Store{Path: filepath.Join(dir, credentials.FileName)}
	env := map[string]string{ServerEnv: url, credentials.ConfigDirEnv: dir}

	// Not logged in: nothing is sent (falcon dev needs nothing).
	if r := invokeEnv(env, "exp", "list"); r.code != 0 {
		t.Fatalf("exp list without a login: %d %s", r.code, r.stderr)
	}
	// Logged in: the cached token goes with every request.
	if err := store.Put(url, credentials.Entry{Token: live, Expiry: time.Now().Add(time.Hour), User: "alice@example.com"}); err != nil {
		t.Fatal(err)
	}
	if r := invokeEnv(env, "exp", "list"); r.code != 0 {
		t.Fatalf("exp list logged in: %d %s", r.code, r.stderr)
	}
	// FALCON_TOKEN wins over the cache.
	withEnvToken := map[string]string{ServerEnv: url, credentials.ConfigDirEnv: dir, credentials.TokenEnv: "ci-token"}
	if r := invokeEnv(withEnvToken, "exp", "list"); r.code != 0 {
		t.Fatalf("exp list with FALCON_TOKEN: %d %s", r.code, r.stderr)
	}
	want := []string{"", "Bearer " + live, "Bearer ci-token"}
	if got := api.calls(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("Authorization sent: %q, want %q", got, want)
	}

	// An expired login is refused before anything is sent.
	if err := store.Put(url, credentials.Entry{Token: dead, Expiry: time.Now().Add(-time.Minute)}); err != nil {
		t.Fatal(err)
	}
	r := invokeEnv(env, "exp", "list")
	if r.code != errdefs.ExitAuth || !strings.Contains(r.stderr, "Error: your login to "+url+" expired at ") ||
		!strings.Contains(r.stderr, "run `falcon auth login --server "+url+"`") {
		t.Errorf("exp list with an expired login: %d %q", r.code, r.stderr)
	}
	r = invokeEnv(map[string]string{ServerEnv: url, credentials.TokenEnv: dead}, "exp", "list")
	if r.code != errdefs.ExitAuth || !strings.Contains(r.stderr, "the token in FALCON_TOKEN expired") {
		t.Errorf("exp list with an expired FALCON_TOKEN: %d %q", r.code, r.stderr)
	}
	if n := len(api.calls()); n != 3 {
		t.Errorf("%d requests reached the server; expired tokens must not be sent", n)
	}

	// The server refusing a token says how to get a new one.
	r = invokeEnv(withEnvToken, "exp", "get", "exp-q7odgo8q9x")
	if r.code != errdefs.ExitAuth || !strings.Contains(r.stderr, "token expired at 2026-01-01T00:00:00Z; run `falcon auth login --server "+url+"`") {
		t.Errorf("server refusal: %d %q", r.code, r.stderr)
	}
}

func TestAuthStatusTokenLogout(t *testing.T) {
	iss := authtest.NewIssuer(t)
	live := iss.Token("alice@example.com")
	dir := t.TempDir()
	const server = "https://falcon.example.com"
	env := map[string]string{ServerEnv: server + "/", credentials.ConfigDirEnv: dir}

	if r := invokeEnv(env, "auth", "status"); r.code != errdefs.ExitAuth || !strings.Contains(r.stderr, "not logged in to "+server) {
		t.Errorf("status before login: %d %q", r.code, r.stderr)
	}
	store := &credentials.Store{Path: filepath.Join(dir, credentials.FileName)}
	_, expiry, _ := credentials.UserOf(live)
	if err := store.Put(server, credentials.Entry{Token: live, Expiry: expiry, User: "alice@example.com"}); err != nil {
		t.Fatal(err)
	}
	r := invokeEnv(env, "auth", "status", "-o", "table")
	if r.code != 0 || !strings.Contains(r.stdout, "Logged in to "+server+" as alice@example.com.") || !strings.Contains(r.stdout, "token from: "+store.Path) {
		t.Errorf("status: %d %q %q", r.code, r.stdout, r.stderr)
	}
	r = invokeEnv(env, "auth", "status", "-o", "json")
	var js map[string]any
	if err := json.Unmarshal([]byte(r.stdout), &js); err != nil || js["user"] != "alice@example.com" || js["server"] != server || js["expires_at"] == nil {
		t.Errorf("status -o json: %q (%v)", r.stdout, err)
	}
	if r := invokeEnv(env, "auth", "token"); r.code != 0 || r.stdout != live+"\n" {
		t.Errorf("token: %d %q %q", r.code, r.stdout, r.stderr)
	}
	// FALCON_TOKEN is reported as the source.
	envTok := map[string]string{ServerEnv: server, credentials.TokenEnv: iss.Token("ci@example.com")}
	if r := invokeEnv(envTok, "auth", "status", "-o", "table"); r.code != 0 || !strings.Contains(r.stdout, "as ci@example.com") || !strings.Contains(r.stdout, "token from: FALCON_TOKEN") {
		t.Errorf("status with FALCON_TOKEN: %d %q %q", r.code, r.stdout, r.stderr)
	}

	if r := invokeEnv(env, "auth", "logout"); r.code != 0 || !strings.Contains(r.stderr, "Logged out of "+server) {
		t.Errorf("logout: %d %q", r.code, r.stderr)
	}
	if r := invokeEnv(env, "auth", "logout"); r.code != 0 || !strings.Contains(r.stderr, "Not logged in") {
		t.Errorf("second logout: %d %q", r.code, r.stderr)
	}
	if r := invokeEnv(env, "auth", "token"); r.code != errdefs.ExitAuth || r.stdout != "" {
		t.Errorf("token after logout: %d %q %q", r.code, r.stdout, r.stderr)
	}

	// An expired login: status and token say so and exit 5.
	if err := store.Put(server, credentials.Entry{Token: live, Expiry: time.Now().Add(-time.Second)}); err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"status", "token"} {
		if r := invokeEnv(env, "auth", verb); r.code != errdefs.ExitAuth || !strings.Contains(r.stderr, "expired") || r.stdout != "" {
			t.Errorf("%s with an expired login: %d %q %q", verb, r.code, r.stdout, r.stderr)
		}
	}
	// Without HOME or FALCON_CONFIG_DIR there is nowhere to keep logins.
	if r := invokeEnv(map[string]string{ServerEnv: server}, "auth", "logout"); r.code == 0 || !strings.Contains(r.stderr, "set HOME or FALCON_CONFIG_DIR") {
		t.Errorf("logout without HOME: %d %q", r.code, r.stderr)
	}
}

func TestServerAuthFlags(t *testing.T) {
	secretFile := filepath.Join(t.TempDir(), "controller-token")
	writeFile(t, secretFile, credentialsSecret+"\n")
	db := []string{"--db-driver", "sqlite", "--db-dsn", "file:" + filepath.Join(t.TempDir(), "x.db")}
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"cloudflare needs a team", append([]string{"server", "--controller-token-file", secretFile}, db...), "--cf-team-domain"},
		{"cloudflare needs an audience", append([]string{"server", "--cf-team-domain", "myteam", "--controller-token-file", secretFile}, db...), "--cf-audience: is required"},
		{"server needs an artifact root", append([]string{"server", "--auth", "none", "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0"}, db...), "--artifact-root: is required"},
		{"server needs a controller token", append([]string{"server", "--auth", "none", "--http-addr", "127.0.0.1:0", "--grpc-addr", "127.0.0.1:0", "--artifact-root", t.TempDir()}, db...), "--controller-token-file: is required"},
		{"unreadable token file", append([]string{"server", "--auth", "none", "--controller-token-file", secretFile + ".missing"}, db...), "--controller-token-file: read controller token"},
		{"auth none on a public address", append([]string{"server", "--auth", "none", "--controller-token-file", secretFile}, db...), `--http-addr: ":8080" is not loopback`},
		{"dev on a public address", []string{"dev", "--data-dir", t.TempDir(), "--http-addr", "0.0.0.0:7070"}, `--http-addr: "0.0.0.0:7070" is not loopback: falcon dev has no authentication`},
		{"controller needs a controller token", []string{"controller", "--api-grpc", "127.0.0.1:1"}, "--controller-token-file: is required"},
		{"node pool timeout must be positive", []string{"controller", "--controller-token-file", secretFile, "--node-pool-timeout", "0s"}, "--node-pool-timeout: must be a positive duration"},
		{"orphan grace must not be negative", []string{"dev", "--data-dir", t.TempDir(), "--orphan-grace", "-1m"}, "--orphan-grace: must not be negative, got -1m0s"},
		{"an unknown pool policy lists the valid ones", []string{"dev", "--data-dir", t.TempDir(), "--pool-policy", "hoard"},
			`--pool-policy: hoard: unknown policy "hoard"; valid policies: spec, per-job, linger=DUR`},
		{"linger needs a duration", []string{"dev", "--data-dir", t.TempDir(), "--pool-policy", "linger=soon"}, `--pool-policy: linger=soon: linger takes a positive duration`},
		{"cap needs a number of pools", []string{"dev", "--data-dir", t.TempDir(), "--pool-policy", "cap=0"}, `--pool-policy: cap=0: cap takes a positive number of pools (cap=4), got "0"`},
		{"cluster choice is the registry's", []string{"controller", "--controller-token-file", secretFile, "--pool-policy", "priority+linger=10m"},
			"--pool-policy: \"priority+linger=10m\" chooses clusters, which the registry sets: put selection: priority in the clusters file"},
		{"a retry wait must be positive", []string{"controller", "--controller-token-file", secretFile, "--dispatch-retry-initial", "0s"},
			"--dispatch-retry-initial: must be a positive duration such as 30s, got 0s"},
		{"a retry max below its first wait", []string{"dev", "--data-dir", t.TempDir(), "--stop-retry-initial", "10s", "--stop-retry-max", "5s"},
			"--stop-retry-max: must be at least --stop-retry-initial (10s), got 5s"},
		{"every bad retry flag is named", []string{"controller", "--controller-token-file", secretFile, "--stop-retry-window", "-1m", "--dispatch-retry-max", "500ms"},
			"--dispatch-retry-max: must be at least --dispatch-retry-initial (1s), got 500ms; --stop-retry-window: must be a positive duration such as 30s, got -1m0s"},
		{"every bad pool flag is named", []string{"controller", "--controller-token-file", secretFile, "--reservation-scale-down", "-1s", "--flex-start-scale-down", "0s"},
			"--reservation-scale-down: must be a positive duration such as 10m, got -1s; --flex-start-scale-down"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := invokeEnv(nil, tt.args...)
			if r.code != errdefs.ExitInvalid || !strings.Contains(r.stderr, tt.want) {
				t.Errorf("exit %d, stderr %q; want %d containing %q", r.code, r.stderr, errdefs.ExitInvalid, tt.want)
			}
		})
	}
}

const credentialsSecret = "0123456789abcdef0123456789abcdef"

// Against a server that needs no login (falcon dev), auth status says so
// instead of asking for a login it could not use.
func TestAuthStatusOnAServerWithoutLogin(t *testing.T) {
	env := apitest.Start(t, nil)
	url := "http://" + env.HTTPAddr
	r := invokeEnv(map[string]string{ServerEnv: url, credentials.ConfigDirEnv: t.TempDir()}, "auth", "status", "-o", "table")
	if r.code != 0 || !strings.Contains(r.stdout, "No login needed: "+url+" attributes calls to ") {
		t.Errorf("auth status: %d %q %q", r.code, r.stdout, r.stderr)
	}
}
