package apiserver_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/provider/local"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

const execAdmin = "root@example.com"

// execEnv is an API server verifying Cloudflare Access tokens, whose local
// cluster's ranks are real processes of a local executor, as on falcon dev.
type execEnv struct {
	*apitest.Env
	iss  *authtest.Issuer
	exec *local.Executor
}

func startExec(t *testing.T) *execEnv {
	t.Helper()
	iss := authtest.NewIssuer(t)
	cf, err := auth.NewCloudflareAccess(context.Background(), iss.Config())
	if err != nil {
		t.Fatal(err)
	}
	ex, err := local.New(t.TempDir(), local.WithLogger(slog.New(slog.DiscardHandler)), local.WithKillGrace(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ex.Close() })
	e := apitest.StartWith(t, apitest.Options{
		Clusters: map[string]string{"local": "local"},
		Server: []apiserver.Option{
			apiserver.WithAuthenticator(cf), apiserver.WithAdmins(auth.NewAdmins(execAdmin)),
			apiserver.WithLocalExec(ex),
		},
	})
	return &execEnv{Env: e, iss: iss, exec: ex}
}

// run starts exp's job's processes and reports the job Running, as the
// resource manager does.
func (e *execEnv) run(t *testing.T, exp *falconv1.Experiment) {
	t.Helper()
	ctx := context.Background()
	for _, j := range exp.GetJobs() {
		ts := exp.GetRoleToTaskSpec()[j.GetRole()]
		if err := e.exec.Start(ctx, local.Spec{ExpID: exp.GetId(), JobID: j.GetId(), ArtifactID: exp.GetArtifact().GetId(), Role: j.GetRole(),
			Command: ts.GetCommand(), Replica: int(ts.GetReplica()), Envs: ts.GetEnvs()}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: j.GetId(), ExpectedStatus: "Pending", Status: "Running", ClusterName: "local"}); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *execEnv) create(t *testing.T, tok, name string, roles map[string]*falconv1.TaskSpec) *falconv1.Experiment {
	t.Helper()
	exp, err := falconv1.NewExperimentServiceClient(e.UserConn).CreateExp(bearer(tok), &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: name, ClusterName: "local", RoleToTaskSpec: roles}})
	if err != nil {
		t.Fatal(err)
	}
	return exp
}

func bearer(tok string) context.Context {
	return metadata.AppendToOutgoingContext(context.Background(), "authorization", "Bearer "+tok)
}

// execResult is what one session returned.
type execResult struct {
	stdout, stderr []byte
	notices        []string
	started        *falconv1.ExecStarted
	exit           *falconv1.ExecExit
}

// grpcExec runs one session over gRPC, sending stdin (then its end) when
// it is not nil.
func grpcExec(ctx context.Context, conn *grpc.ClientConn, start *falconv1.ExecStart, stdin []byte) (*execResult, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := falconv1.NewExperimentServiceClient(conn).ExecExp(ctx)
	if err != nil {
		return nil, err
	}
	start.Stdin = stdin != nil
	if err := st.Send(&falconv1.ExecRequest{Msg: &falconv1.ExecRequest_Start{Start: start}}); err != nil {
		return nil, err
	}
	if stdin != nil {
		go func() {
			for len(stdin) > 0 {
				n := min(len(stdin), 32<<10)
				if st.Send(&falconv1.ExecRequest{Msg: &falconv1.ExecRequest_Stdin{Stdin: stdin[:n]}}) != nil {
					return
				}
				stdin = stdin[n:]
			}
			_ = st.Send(&falconv1.ExecRequest{Msg: &falconv1.ExecRequest_CloseStdin{CloseStdin: true}})
		}()
	}
	r := &execResult{}
	for {
		resp, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return r, nil
		}
		if err != nil {
			return r, err
		}
		switch m := resp.GetMsg().(type) {
		case *falconv1.ExecResponse_Stdout:
			r.stdout = append(r.stdout, m.Stdout...)
		case *falconv1.ExecResponse_Stderr:
			r.stderr = append(r.stderr, m.Stderr...)
		case *falconv1.ExecResponse_Notice:
			r.notices = append(r.notices, m.Notice)
		case *falconv1.ExecResponse_Started:
			r.started = m.Started
		case *falconv1.ExecResponse_Exit:
			r.exit = m.Exit
		}
	}
}

func TestExecIntoLocalRanks(t *testing.T) {
	e := startExec(t)
	alice := e.iss.Token("alice@example.com")
	exp := e.create(t, alice, "exec-local", map[string]*falconv1.TaskSpec{
		"main": {Command: "sleep 120", Replica: 2, Envs: map[string]string{"GREETING": "hello"}}})
	e.run(t, exp)
	id := exp.GetId()
	ctx := bearer(alice)

	tests := []struct {
		name              string
		start             *falconv1.ExecStart
		stdin             []byte
		wantOut, wantErr  string
		wantCode, wantSig int32
		wantPod           string
	}{
		{name: "exit 0, stdout and stderr apart", start: &falconv1.ExecStart{Command: []string{"sh", "-c", "echo out; echo err >&2"}},
			wantOut: "out\n", wantErr: "err\n", wantPod: exp.GetJobs()[0].GetId() + "-0"},
		{name: "exit 3", start: &falconv1.ExecStart{Command: []string{"sh", "-c", "exit 3"}}, wantCode: 3},
		{name: "killed by SIGKILL is 137", start: &falconv1.ExecStart{Command: []string{"sh", "-c", "kill -9 $$"}}, wantCode: 137, wantSig: 9},
		{name: "the rank's environment and directory", start: &falconv1.ExecStart{Command: []string{"sh", "-c", `echo $GREETING $FALCON_EXP_ID $FALCON_RANK $FALCON_WORLD_SIZE; pwd; test -d "$FALCON_ARTIFACT_DIR" && echo artifacts`}},
			wantOut: fmt.Sprintf("hello %s 0 2\n%s\nartifacts\n", id, "RANKDIR0")},
		{name: "rank 1", start: &falconv1.ExecStart{Rank: 1, Command: []string{"sh", "-c", "echo $FALCON_RANK"}}, wantOut: "1\n", wantPod: exp.GetJobs()[0].GetId() + "-1"},
		{name: "stdin", start: &falconv1.ExecStart{Command: []string{"sh", "-c", "tr a-z A-Z"}}, stdin: []byte("shout\n"), wantOut: "SHOUT\n"},
		{name: "a terminal", start: &falconv1.ExecStart{Tty: true, TerminalSize: &falconv1.TerminalSize{Width: 91, Height: 37},
			Command: []string{"sh", "-c", "test -t 0 && test -t 1 && stty size"}}, wantOut: "37 91\r\n"},
		{name: "a command not found is 127", start: &falconv1.ExecStart{Command: []string{"no-such-command"}}, wantCode: 127,
			wantErr: "falcon: exec: \"no-such-command\": executable file not found in $PATH\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.start.ExpId = id
			r, err := grpcExec(ctx, e.UserConn, tt.start, tt.stdin)
			if err != nil {
				t.Fatalf("exec: %v (stderr %q)", err, r.stderr)
			}
			out := string(r.stdout)
			if strings.Contains(tt.wantOut, "RANKDIR0") {
				lines := strings.Split(out, "\n")
				if len(lines) > 1 && strings.HasSuffix(lines[1], "/run/"+exp.GetJobs()[0].GetId()+"/0") {
					lines[1] = "RANKDIR0"
				}
				out = strings.Join(lines, "\n")
			}
			if out != tt.wantOut || string(r.stderr) != tt.wantErr {
				t.Errorf("stdout %q stderr %q; want %q and %q", out, r.stderr, tt.wantOut, tt.wantErr)
			}
			if r.exit == nil || r.exit.GetCode() != tt.wantCode || r.exit.GetSignal() != tt.wantSig {
				t.Errorf("exit %v; want code %d signal %d", r.exit, tt.wantCode, tt.wantSig)
			}
			if tt.wantPod != "" && r.started.GetPod() != tt.wantPod {
				t.Errorf("started in %q; want %q", r.started.GetPod(), tt.wantPod)
			}
		})
	}

	// 16 MiB (FALCON_EXEC_MIB to scale) come back byte for byte, over
	// gRPC and over the WebSocket route the CLI uses.
	mib := envInt(t, "FALCON_EXEC_MIB", 16)
	cmd := []string{"sh", "-c", fmt.Sprintf("head -c %d /dev/zero | tr '\\0' x; echo", mib<<20)}
	want := sha256.Sum256(append(bytes.Repeat([]byte("x"), mib<<20), '\n'))
	r, err := grpcExec(ctx, e.UserConn, &falconv1.ExecStart{ExpId: id, Command: cmd}, nil)
	if err != nil || sha256.Sum256(r.stdout) != want {
		t.Errorf("%d MiB over gRPC: %d bytes, %v", mib, len(r.stdout), err)
	}
	c, err := client.New("http://"+e.HTTPAddr, client.WithToken(func(context.Context) (string, error) { return alice, nil }))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	var stderr bytes.Buffer
	exit, err := c.Exec(context.Background(), &falconv1.ExecStart{ExpId: id, Command: cmd}, client.ExecIO{Stdout: h, Stderr: &stderr})
	if err != nil || exit.GetCode() != 0 || !bytes.Equal(h.Sum(nil), want[:]) {
		t.Errorf("%d MiB over the WebSocket: exit %v, %v (stderr %q)", mib, exit, err, stderr.String())
	}
	var out bytes.Buffer
	exit, err = c.Exec(context.Background(), &falconv1.ExecStart{ExpId: id, Rank: 1, Command: []string{"sh", "-c", "cat; exit 5"}, Stdin: true},
		client.ExecIO{Stdin: strings.NewReader("through the websocket"), Stdout: &out, Stderr: &stderr})
	if err != nil || exit.GetCode() != 5 || out.String() != "through the websocket" {
		t.Errorf("stdin over the WebSocket: %q exit %v, %v", out.String(), exit, err)
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(name))
	if v == "" {
		return def
	}
	var n int
	if _, err := fmt.Sscan(v, &n); err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

func TestExecBadInput(t *testing.T) {
	e := startExec(t)
	alice := e.iss.Token("alice@example.com")
	exp := e.create(t, alice, "exec-roles", map[string]*falconv1.TaskSpec{
		"main": {Command: "sleep 120", Replica: 2}, "prep": {Command: "sleep 120", Replica: 1}})
	id := exp.GetId()
	tests := []struct {
		name  string
		start *falconv1.ExecStart
		code  codes.Code
		msg   string
	}{
		{"several roles and none named", &falconv1.ExecStart{ExpId: id, Command: []string{"true"}}, codes.InvalidArgument, "role: experiment " + id + " has several roles (main, prep): name one with --role"},
		{"an unknown role", &falconv1.ExecStart{ExpId: id, Role: "eval", Command: []string{"true"}}, codes.InvalidArgument, `role: experiment ` + id + ` has no role "eval"; roles: main, prep`},
		{"an unknown rank", &falconv1.ExecStart{ExpId: id, Role: "main", Rank: 2, Command: []string{"true"}}, codes.InvalidArgument, "rank: role main has ranks 0 to 1 (replica 2), not 2"},
		{"no command", &falconv1.ExecStart{ExpId: id, Role: "main"}, codes.InvalidArgument, "command: name the command to run, e.g. falcon exp exec " + id + " -- nvidia-smi"},
		{"an unknown experiment", &falconv1.ExecStart{ExpId: "exp-0000000000", Command: []string{"true"}}, codes.NotFound, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := grpcExec(bearer(alice), e.UserConn, tt.start, nil)
			if st := status.Convert(err); st.Code() != tt.code || (tt.msg != "" && st.Message() != tt.msg) {
				t.Errorf("got %v\nwant %s: %s", err, tt.code, tt.msg)
			}
		})
	}
	// The first message must be start.
	st, err := falconv1.NewExperimentServiceClient(e.UserConn).ExecExp(bearer(alice))
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Send(&falconv1.ExecRequest{Msg: &falconv1.ExecRequest_Stdin{Stdin: []byte("x")}})
	if _, err := st.Recv(); status.Code(err) != codes.InvalidArgument {
		t.Errorf("stdin before start: %v; want InvalidArgument", err)
	}
}

// Only the owner or an admin may exec; every session, refused or not, is
// in the audit log with its rank, command, exit code and duration.
var durationRE = regexp.MustCompile(`duration=[0-9.]+[a-zµ]+`)

func TestExecOwnershipAndAudit(t *testing.T) {
	e := startExec(t)
	alice, bob, root := e.iss.Token("alice@example.com"), e.iss.Token("bob@example.com"), e.iss.Token(execAdmin)
	exp := e.create(t, alice, "exec-owned", map[string]*falconv1.TaskSpec{"main": {Command: "sleep 120", Replica: 1}})
	e.run(t, exp)
	id := exp.GetId()
	start := func() *falconv1.ExecStart {
		return &falconv1.ExecStart{ExpId: id, Command: []string{"sh", "-c", "exit 7"}}
	}
	if r, err := grpcExec(bearer(alice), e.UserConn, start(), nil); err != nil || r.exit.GetCode() != 7 {
		t.Fatalf("alice: %v %v", r, err)
	}
	_, err := grpcExec(bearer(bob), e.UserConn, start(), nil)
	if st := status.Convert(err); st.Code() != codes.PermissionDenied || !strings.Contains(st.Message(), "alice@example.com") || !strings.Contains(st.Message(), "exec into") {
		t.Fatalf("bob: %v; want PermissionDenied naming alice", err)
	}
	// Over the WebSocket too, with the Access header as Cloudflare's edge sets it.
	bc, _ := client.New("http://"+e.HTTPAddr, client.WithToken(func(context.Context) (string, error) { return bob, nil }))
	if _, err := bc.Exec(context.Background(), start(), client.ExecIO{Stdout: io.Discard, Stderr: io.Discard}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("bob over the WebSocket: %v; want PermissionDenied", err)
	}
	nc, _ := client.New("http://" + e.HTTPAddr)
	if _, err := nc.Exec(context.Background(), start(), client.ExecIO{Stdout: io.Discard, Stderr: io.Discard}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("no token over the WebSocket: %v; want Unauthenticated", err)
	}
	if r, err := grpcExec(bearer(root), e.UserConn, start(), nil); err != nil || r.exit.GetCode() != 7 {
		t.Fatalf("admin: %v %v", r, err)
	}

	entries, _, err := e.Store.ListAudit(context.Background(), store.AuditFilter{TargetID: id, Method: falconv1.ExperimentService_ExecExp_FullMethodName})
	if err != nil {
		t.Fatal(err)
	}
	type row struct{ Actor, Outcome, Detail string }
	var got []row
	for i := len(entries) - 1; i >= 0; i-- {
		en := entries[i]
		got = append(got, row{en.ActorEmail, en.Outcome, durationRE.ReplaceAllString(en.Detail, "duration=D")})
	}
	job := exp.GetJobs()[0].GetId()
	where := `role=main rank=0 job=` + job + ` command=["sh" "-c" "exit 7"]`
	refusal := "permission denied: experiment " + id + " belongs to alice@example.com; only its creator or an admin may exec into it"
	want := []row{
		{"alice@example.com", "ok", where + " exit=7 duration=D"},
		{"bob@example.com", "PermissionDenied", `role= rank=0 command=["sh" "-c" "exit 7"] duration=D; ` + refusal},
		{"bob@example.com", "PermissionDenied", `role= rank=0 command=["sh" "-c" "exit 7"] duration=D; ` + refusal},
		{execAdmin, "ok", "as admin; owner alice@example.com; " + where + " exit=7 duration=D"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("audit log (-want +got):\n%s", diff)
	}

	// The sessions that ran are in the experiment's events, and mark it
	// active for its idle_ttl.
	evs, err := e.Store.ListEvents(context.Background(), store.EventFilter{ExpID: id})
	if err != nil {
		t.Fatal(err)
	}
	var sessions []string
	for _, ev := range evs {
		if ev.Detail["exec"] != "" {
			sessions = append(sessions, ev.Detail["exec"]+" "+ev.Detail["exit_code"])
		}
	}
	if diff := cmp.Diff([]string{"opened ", "closed 7", "opened ", "closed 7"}, sessions); diff != "" {
		t.Errorf("exec events (-want +got):\n%s", diff)
	}
	if got, _ := e.Store.GetExp(context.Background(), id); got.ActiveAt == nil {
		t.Error("the experiment is not marked active after exec sessions")
	}
}

// A rank that does not run yet is waited for, with a notice, unless
// no_wait; an ended experiment says when it ended and where its files are.
func TestExecPendingAndEnded(t *testing.T) {
	e := startExec(t)
	alice := e.iss.Token("alice@example.com")
	exp := e.create(t, alice, "exec-pending", map[string]*falconv1.TaskSpec{"main": {Command: "sleep 120", Replica: 1}})
	id := exp.GetId()
	_, err := grpcExec(bearer(alice), e.UserConn, &falconv1.ExecStart{ExpId: id, NoWait: true, Command: []string{"true"}}, nil)
	if st := status.Convert(err); st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "does not run yet") || !strings.Contains(st.Message(), "--no-wait") {
		t.Fatalf("no_wait on Pending: %v", err)
	}
	done := make(chan struct{})
	var r *execResult
	go func() {
		defer close(done)
		r, err = grpcExec(bearer(alice), e.UserConn, &falconv1.ExecStart{ExpId: id, Command: []string{"sh", "-c", "echo $FALCON_RANK"}}, nil)
	}()
	time.Sleep(300 * time.Millisecond)
	select {
	case <-done:
		t.Fatalf("exec on Pending returned before the rank ran: %v %v", r, err)
	default:
	}
	e.run(t, exp)
	<-done
	if err != nil || string(r.stdout) != "0\n" || len(r.notices) == 0 || !strings.Contains(r.notices[0], "does not run yet") || !strings.Contains(r.notices[0], "waiting") {
		t.Fatalf("exec that waited: %+v, %v", r, err)
	}

	// The experiment ends.
	if _, err := falconv1.NewExperimentServiceClient(e.Conn).UpdateExpStatus(context.Background(), &falconv1.UpdateExpStatusRequest{
		Id: id, ExpectedStatus: "Running", Status: "Failed", Reason: "JobFailed", Message: "rank 0 failed"}); err != nil {
		t.Fatal(err)
	}
	_, err = grpcExec(bearer(alice), e.UserConn, &falconv1.ExecStart{ExpId: id, Command: []string{"true"}}, nil)
	st := status.Convert(err)
	if st.Code() != codes.FailedPrecondition || !strings.Contains(st.Message(), "ended Failed at ") || !strings.Contains(st.Message(), "falcon artifact get "+id) {
		t.Fatalf("exec on an ended experiment: %v", err)
	}
}
