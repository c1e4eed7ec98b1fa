package e2e

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	grpcstatus "google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/testenv/syncbuf"
)

// mariaDB is a MariaDB server of the test's own, so the test may stop and
// freeze it without touching the shared one other tests use.
type mariaDB struct {
	t       testing.TB
	bin     string
	dataDir string
	dir     string
	port    string
	cmd     *exec.Cmd
	log     *syncbuf.Buffer
	exited  chan struct{}
}

// lookMariaDB finds the server and its installer: on PATH, or in sbin where
// Debian puts mariadbd, which is not on every user's PATH.
func lookMariaDB(t testing.TB) (server, install string) {
	find := func(name string) string {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
		for _, dir := range []string{"/usr/sbin", "/usr/local/sbin", "/usr/local/bin"} {
			if p := filepath.Join(dir, name); fileExists(p) {
				return p
			}
		}
		return ""
	}
	server, install = find("mariadbd"), find("mariadb-install-db")
	if server == "" || install == "" {
		msg := "mariadbd and mariadb-install-db are needed to stop a database of the test's own (apt-get install mariadb-server)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + " (CI=true: failing instead of skipping)")
		}
		t.Skip(msg)
	}
	return server, install
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir()
}

// startMariaDB initialises a data directory and serves it on a free
// loopback port, with no grants to set up: only this test can reach it.
func startMariaDB(t testing.TB) *mariaDB {
	t.Helper()
	server, install := lookMariaDB(t)
	// A short directory: the socket path must fit in 108 bytes.
	dir, err := os.MkdirTemp("", "falcon-mdb-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	m := &mariaDB{t: t, bin: server, dir: dir, dataDir: filepath.Join(dir, "data")}
	_, m.port, _ = net.SplitHostPort(freeAddr(t))
	out, err := exec.Command(install, "--no-defaults", "--datadir="+m.dataDir, "--auth-root-authentication-method=normal",
		"--user="+currentUser(), "--skip-test-db").CombinedOutput()
	if err != nil {
		t.Fatalf("mariadb-install-db: %v\n%s", err, out)
	}
	m.start()
	t.Cleanup(func() {
		if m.cmd != nil {
			_ = m.cmd.Process.Signal(syscall.SIGCONT)
			_ = m.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-m.exited:
			case <-time.After(30 * time.Second):
				_ = m.cmd.Process.Kill()
				<-m.exited
			}
		}
	})
	db, err := sql.Open("mysql", m.dsn(""))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE DATABASE falcon CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"); err != nil {
		t.Fatal(err)
	}
	return m
}

func currentUser() string {
	if u := os.Getenv("USER"); u != "" {
		return u
	}
	return "root"
}

// start runs mariadbd on the data directory and waits until it answers.
func (m *mariaDB) start() {
	m.t.Helper()
	m.log = &syncbuf.Buffer{}
	m.cmd = exec.Command(m.bin, "--no-defaults", "--datadir="+m.dataDir, "--port="+m.port, "--bind-address=127.0.0.1",
		"--socket="+filepath.Join(m.dir, "sock"), "--pid-file="+filepath.Join(m.dir, "pid"), "--user="+currentUser(),
		"--skip-grant-tables", "--innodb-buffer-pool-size=32M", "--skip-log-bin")
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		m.t.Fatal(err)
	}
	m.exited = make(chan struct{})
	go func(c *exec.Cmd, done chan struct{}) { _ = c.Wait(); close(done) }(m.cmd, m.exited)
	db, err := sql.Open("mysql", m.dsn(""))
	if err != nil {
		m.t.Fatal(err)
	}
	defer db.Close()
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if err = db.Ping(); err == nil {
			return
		}
		select {
		case <-m.exited:
			m.t.Fatalf("mariadbd exited: %s", m.log.String())
		default:
		}
		if time.Now().After(deadline) {
			m.t.Fatalf("mariadbd never answered: %v\n%s", err, m.log.String())
		}
	}
}

// waitStopped returns once every thread of the server is stopped. kill(2)
// only queues SIGSTOP: a thread in the middle of a query could still answer
// it, and the outage would begin with one call served.
func (m *mariaDB) waitStopped() {
	deadline := time.Now().Add(10 * time.Second)
	dir := fmt.Sprintf("/proc/%d/task", m.cmd.Process.Pid)
	for time.Now().Before(deadline) {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			m.t.Fatalf("threads of mariadbd: %v", err)
		}
		stopped := 0
		for _, task := range tasks {
			stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
			// The state follows the command name in parentheses: "pid (comm) T ...".
			if i := strings.LastIndexByte(string(stat), ')'); err == nil && i >= 0 && i+2 < len(stat) && (stat[i+2] == 'T' || stat[i+2] == 't') {
				stopped++
			}
		}
		if stopped == len(tasks) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	m.t.Fatal("mariadbd did not stop within 10s of SIGSTOP")
}

// kill ends the server as a crash or a lost machine would.
func (m *mariaDB) kill() {
	_ = m.cmd.Process.Kill()
	<-m.exited
	m.cmd = nil
}

func (m *mariaDB) dsn(db string) string {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr, cfg.DBName, cfg.ParseTime = "root", "tcp", "127.0.0.1:"+m.port, db, true
	cfg.Timeout = 5 * time.Second
	return cfg.FormatDSN()
}

// TestDatabaseOutage stops the database under a running `falcon server` and
// `falcon controller` while experiments run on a local cluster: killed (the
// server refuses connections) or frozen with SIGSTOP (connections hang, as
// across a partition). Meanwhile the API must answer Unavailable, which
// clients retry, not Internal, which they report as a bug; once the
// database is back every experiment must finish, each job having run
// exactly once, and no experiment may be lost or appear twice.
//
// FALCON_DB_OUTAGE sets how long each outage lasts (make bench: 60s).
func TestDatabaseOutage(t *testing.T) {
	outage := 4 * time.Second
	if v := os.Getenv("FALCON_DB_OUTAGE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("FALCON_DB_OUTAGE=%q: want a positive duration", v)
		}
		outage = d
	}
	for _, tc := range []struct {
		name string
		stop func(*mariaDB) // begins the outage
		back func(*mariaDB) // ends it
	}{
		{"killed", (*mariaDB).kill, (*mariaDB).start},
		{"frozen", func(m *mariaDB) { _ = m.cmd.Process.Signal(syscall.SIGSTOP); m.waitStopped() }, func(m *mariaDB) { _ = m.cmd.Process.Signal(syscall.SIGCONT) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testDatabaseOutage(t, outage, tc.stop, tc.back)
		})
	}
}

func testDatabaseOutage(t *testing.T, outage time.Duration, stop, back func(*mariaDB)) {
	m := startMariaDB(t)
	dsn := m.dsn("falcon")
	if out, err := exec.Command(falconBin, "migrate", "--db-driver", "mysql", "--db-dsn", dsn).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v\n%s", err, out)
	}
	dir := t.TempDir()
	httpAddr, grpcAddr := freeAddr(t), freeAddr(t)
	secret := filepath.Join(dir, "controller-token")
	if err := os.WriteFile(secret, []byte("e2e-controller-secret-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var serverLog, ctlLog syncbuf.Buffer
	server := exec.Command(falconBin, "server", "--db-driver", "mysql", "--db-dsn", dsn,
		"--http-addr", httpAddr, "--grpc-addr", grpcAddr, "--artifact-root", dir, "--log-dir", dir+"/logs",
		"--auth", "none", "--controller-token-file", secret)
	server.Stderr = &serverLog
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Process.Signal(syscall.SIGTERM); _ = server.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get("http://" + httpAddr + "/healthz"); err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("server did not come up:\n%s", serverLog.String())
		}
	}
	ctl := exec.Command(falconBin, "controller", "--api-grpc", grpcAddr, "--data-dir", dir, "--local-cluster", "box", "--controller-token-file", secret)
	ctl.Stderr = &ctlLog
	if err := ctl.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctl.Process.Signal(syscall.SIGTERM); _ = ctl.Wait() })
	defer func() {
		if t.Failed() {
			t.Logf("server log:\n%s\ncontroller log:\n%s\nmariadbd log:\n%s", serverLog.String(), ctlLog.String(), m.log.String())
		}
	}()

	conn, err := grpc.NewClient(grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	exps := falconv1.NewExperimentServiceClient(conn)
	clusters := falconv1.NewClusterServiceClient(conn)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		l, err := clusters.ListClusters(context.Background(), &falconv1.ListClustersRequest{})
		if err == nil && len(l.GetItems()) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the controller never registered its cluster: %v %v", l, err)
		}
	}

	// Each job appends a line per replica to ran: a job run twice (or not
	// at all) shows in the count. Runs are spread over the outage so that
	// some end while the database is down and their outcome must wait.
	ran := filepath.Join(dir, "ran")
	type created struct {
		id, name string
		replica  int
	}
	var made []created
	create := func(ctx context.Context, i int, d time.Duration) (created, error) {
		c := created{name: fmt.Sprintf("outage-%d", i), replica: 1 + i%2}
		x, err := exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
			Name: c.name, Config: "cfg", ClusterName: "box",
			RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {
				Command: fmt.Sprintf("sleep %.1f && echo %s >> %s", d.Seconds(), c.name, ran), Replica: int32(c.replica),
			}},
		}})
		c.id = x.GetId()
		return c, err
	}
	const before = 8
	for i := range before {
		c, err := create(context.Background(), i, 3*time.Second+time.Duration(i)*outage/before)
		if err != nil {
			t.Fatal(err)
		}
		made = append(made, c)
	}
	// The jobs have started (the local backend runs them) before the
	// database goes; most end while it is away.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		n := 0
		for _, c := range made {
			x, err := exps.GetExp(context.Background(), &falconv1.GetExpRequest{Id: c.id})
			if err != nil {
				t.Fatal(err)
			}
			if x.GetStatus() == "Running" || x.GetStatus() == "Succeeded" {
				n++
			}
		}
		if n == len(made) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d experiments running before the outage", n, len(made))
		}
	}

	stop(m)
	began := time.Now()
	// Ask the API, as users do, throughout the outage: every answer must
	// be Unavailable (a client's deadline passing is DeadlineExceeded,
	// which says as much). Creates that fail must leave nothing behind.
	codesSeen := map[codes.Code]int{}
	var internal []string
	for i := before; time.Since(began) < outage; i++ {
		calls := []struct {
			what string
			call func(ctx context.Context) error
		}{
			{"GetExp", func(ctx context.Context) error {
				_, err := exps.GetExp(ctx, &falconv1.GetExpRequest{Id: made[0].id})
				return err
			}},
			{"ListExps", func(ctx context.Context) error {
				_, err := exps.ListExps(ctx, &falconv1.ListExpsRequest{})
				return err
			}},
			{"CreateExp", func(ctx context.Context) error {
				c, err := create(ctx, i, time.Second)
				if err == nil {
					made = append(made, c)
				}
				return err
			}},
		}
		for _, c := range calls {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			err := c.call(ctx)
			cancel()
			code := grpcstatus.Code(err)
			codesSeen[code]++
			if code != codes.Unavailable && code != codes.DeadlineExceeded {
				internal = append(internal, fmt.Sprintf("%s: %v", c.what, err))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	back(m)
	restored := time.Now()
	t.Logf("outage %v: API answers %v", time.Since(began).Round(100*time.Millisecond), codesSeen)
	if len(internal) > 0 {
		sort.Strings(internal)
		t.Errorf("during the outage the API answered %d calls with codes other than Unavailable (a frozen database may also time out: DeadlineExceeded): %s", len(internal), strings.Join(uniq(internal), "; "))
	}

	// Every experiment ends Succeeded, each job having run exactly once.
	var last map[string]string
	for deadline := time.Now().Add(2*time.Minute + outage); ; time.Sleep(200 * time.Millisecond) {
		last = map[string]string{}
		done := 0
		for _, c := range made {
			x, err := exps.GetExp(context.Background(), &falconv1.GetExpRequest{Id: c.id})
			if err != nil {
				last[c.name] = err.Error()
				continue
			}
			last[c.name] = x.GetStatus() + " " + x.GetMessage()
			if x.GetStatus() == "Succeeded" || x.GetStatus() == "Failed" || x.GetStatus() == "Aborted" {
				done++
			}
		}
		if done == len(made) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d experiments ended after the database came back: %v", done, len(made), last)
		}
	}
	t.Logf("all %d experiments ended %v after the database came back", len(made), time.Since(restored).Round(100*time.Millisecond))
	for name, st := range last {
		if !strings.HasPrefix(st, "Succeeded") {
			t.Errorf("experiment %s: %s", name, st)
		}
	}
	b, err := os.ReadFile(ran)
	if err != nil {
		t.Fatal(err)
	}
	runs := map[string]int{}
	for _, l := range strings.Fields(string(b)) {
		runs[l]++
	}
	for _, c := range made {
		if runs[c.name] != c.replica {
			t.Errorf("experiment %s: %d runs of its %d replicas", c.name, runs[c.name], c.replica)
		}
		delete(runs, c.name)
	}
	for name, n := range runs {
		t.Errorf("%d runs of %s, an experiment whose create failed", n, name)
	}
	// The list holds exactly the experiments whose create succeeded.
	names := map[string]int{}
	for token := ""; ; {
		l, err := exps.ListExps(context.Background(), &falconv1.ListExpsRequest{PageSize: 100, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range l.GetItems() {
			names[x.GetName()]++
		}
		if token = l.GetNextPageToken(); token == "" {
			break
		}
	}
	for _, c := range made {
		if names[c.name] != 1 {
			t.Errorf("experiment %s listed %d times, want once", c.name, names[c.name])
		}
		delete(names, c.name)
	}
	for name, n := range names {
		t.Errorf("experiment %s listed %d times though its create failed", name, n)
	}
}

func uniq(s []string) []string {
	var out []string
	for i, x := range s {
		if i == 0 || x != s[i-1] {
			out = append(out, x)
		}
	}
	return out
}
