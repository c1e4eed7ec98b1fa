package cp

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/provider/local"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

func TestParse(t *testing.T) {
	for _, tt := range []struct{ src, dst, err string }{
		{"a", "exp-q7odgo8q9x:/tmp/a", ""},
		{"exp-q7odgo8q9x:rel/a", "./b", ""},
		{"a", "b", "both \"a\" and \"b\" are local"},
		{"exp-q7odgo8q9x:/a", "exp-q7odgo8q9x:/b", "are remote"},
		{"a", "exp-q7odgo8q9x:", "name a path after"},
	} {
		_, _, err := Parse(tt.src, tt.dst)
		if (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("Parse(%q, %q) = %v; want %q", tt.src, tt.dst, err, tt.err)
		}
	}
}

// cutter is a TCP proxy to the API server that cuts each of the first
// cuts connections once limit bytes have gone through it one way: a
// connection that drops mid-transfer, as a proxy or a restart would.
type cutter struct {
	l      net.Listener
	target string
	limit  int64
	cuts   atomic.Int32
	upload bool // count client-to-server bytes, else server-to-client
}

func startCutter(t *testing.T, target string, limit int64, cuts int32, upload bool) *cutter {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c := &cutter{l: l, target: target, limit: limit, upload: upload}
	c.cuts.Store(cuts)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go c.serve(in)
		}
	}()
	return c
}

func (c *cutter) serve(in net.Conn) {
	out, err := net.Dial("tcp", c.target)
	if err != nil {
		in.Close()
		return
	}
	var n atomic.Int64
	spared := false
	pipe := func(dst, src net.Conn, counted bool) {
		buf := make([]byte, 32<<10)
		for {
			k, err := src.Read(buf)
			if k > 0 {
				if _, werr := dst.Write(buf[:k]); werr != nil {
					break
				}
				// The first cuts connections to pass the limit are cut there.
				if counted && !spared && n.Add(int64(k)) > c.limit {
					if c.cuts.Add(-1) >= 0 {
						break
					}
					spared = true
				}
			}
			if err != nil {
				break
			}
		}
		in.Close()
		out.Close()
	}
	go pipe(out, in, c.upload)
	go pipe(in, out, !c.upload)
}

func startRank(t *testing.T) (*apitest.Env, string, string) {
	t.Helper()
	ex, err := local.New(t.TempDir(), local.WithLogger(slog.New(slog.DiscardHandler)), local.WithKillGrace(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ex.Close() })
	e := apitest.Start(t, map[string]string{"local": "local"}, apiserver.WithLocalExec(ex), apiserver.WithLogger(slog.New(slog.DiscardHandler)))
	exp := e.Create(t, "cp-resume", map[string]*falconv1.TaskSpec{"main": {Command: "sleep 120", Replica: 1}})
	j := exp.GetJobs()[0]
	if err := ex.Start(context.Background(), local.Spec{ExpID: exp.GetId(), JobID: j.GetId(), ArtifactID: exp.GetArtifact().GetId(), Role: "main", Command: "sleep 120", Replica: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Jobs.UpdateJobStatus(context.Background(), &falconv1.UpdateJobStatusRequest{Id: j.GetId(), ExpectedStatus: "Pending", Status: "Running", ClusterName: "local"}); err != nil {
		t.Fatal(err)
	}
	return e, exp.GetId(), t.TempDir()
}

func randomFile(t *testing.T, p string, n int) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	os.MkdirAll(filepath.Dir(p), 0o755)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return b
}

// A connection cut in the middle of a file resumes from the byte reached,
// both ways, and one cut in the middle of a tree sends again only what did
// not arrive whole; the result is checked by cksum either way.
func TestDroppedStreamsResume(t *testing.T) {
	e, id, remoteDir := startRank(t)
	local := t.TempDir()
	body := randomFile(t, filepath.Join(local, "f.bin"), 6<<20)
	for i := range 20 {
		randomFile(t, filepath.Join(local, "tree", "d", string(rune('a'+i))), 300<<10)
	}
	for _, tt := range []struct {
		name     string
		upload   bool
		src, dst string
		check    func(t *testing.T)
	}{
		{"file up", true, filepath.Join(local, "f.bin"), id + ":" + remoteDir + "/up/f.bin", func(t *testing.T) {
			if got, _ := os.ReadFile(filepath.Join(remoteDir, "up/f.bin")); !bytes.Equal(got, body) {
				t.Errorf("uploaded file: %d bytes differ", len(got))
			}
		}},
		{"file down", false, id + ":" + remoteDir + "/up/f.bin", filepath.Join(local, "down.bin"), func(t *testing.T) {
			if got, _ := os.ReadFile(filepath.Join(local, "down.bin")); !bytes.Equal(got, body) {
				t.Errorf("downloaded file: %d bytes differ", len(got))
			}
		}},
		{"tree up", true, filepath.Join(local, "tree"), id + ":" + remoteDir + "/tree", func(t *testing.T) {
			for i := range 20 {
				a, _ := os.ReadFile(filepath.Join(local, "tree", "d", string(rune('a'+i))))
				b, _ := os.ReadFile(filepath.Join(remoteDir, "tree", "d", string(rune('a'+i))))
				if !bytes.Equal(a, b) {
					t.Errorf("tree file %d differs", i)
				}
			}
		}},
		{"tree down", false, id + ":" + remoteDir + "/tree", filepath.Join(local, "back"), func(t *testing.T) {
			for i := range 20 {
				a, _ := os.ReadFile(filepath.Join(local, "tree", "d", string(rune('a'+i))))
				b, _ := os.ReadFile(filepath.Join(local, "back", "d", string(rune('a'+i))))
				if !bytes.Equal(a, b) {
					t.Errorf("tree file %d differs", i)
				}
			}
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Every exec of a copy is a connection of its own; the first
			// two to carry 2 MiB are cut there.
			cut := startCutter(t, e.HTTPAddr, 2<<20, 2, tt.upload)
			c, err := client.New("http://" + cut.l.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			var log bytes.Buffer
			from, to, err := Parse(tt.src, tt.dst)
			if err != nil {
				t.Fatal(err)
			}
			r := &remote{c: c, exp: id, notices: io.Discard}
			cp := &copier{r: r, attempts: 10, backoff: 10 * time.Millisecond, log: &log}
			if to.exp != "" {
				err = cp.upload(context.Background(), from.path, to.path)
			} else {
				err = cp.download(context.Background(), from.path, to.path)
			}
			if err != nil {
				t.Fatalf("copy: %v\n%s", err, log.String())
			}
			if !strings.Contains(log.String(), "resuming") && !strings.Contains(log.String(), "again") {
				t.Errorf("no drop was resumed; log:\n%s", log.String())
			}
			tt.check(t)
		})
	}
}

// On a terminal a copy draws what it has moved on one line of stderr, left
// at the totals; piped, it prints nothing.
func TestProgressOnATerminal(t *testing.T) {
	e, id, remoteDir := startRank(t)
	local := t.TempDir()
	randomFile(t, filepath.Join(local, "f.bin"), 3<<20)
	for i := range 3 {
		randomFile(t, filepath.Join(local, "tree", string(rune('a'+i))), 100<<10)
	}
	for _, tt := range []struct {
		name, src, dst string
		tty            bool
		want           string
	}{
		{"file up", filepath.Join(local, "f.bin"), id + ":" + remoteDir + "/f.bin", true, "\r\033[Kf.bin: 3.0 MiB/3.0 MiB\n"},
		{"file down", id + ":" + remoteDir + "/f.bin", filepath.Join(local, "back.bin"), true, "\r\033[Kf.bin: 3.0 MiB/3.0 MiB\n"},
		{"tree up", filepath.Join(local, "tree"), id + ":" + remoteDir + "/tree", true, "\r\033[Ktree: 300.0 KiB/300.0 KiB\n"},
		{"tree down", id + ":" + remoteDir + "/tree", filepath.Join(local, "treeback"), true, "\r\033[Ktree: 300.0 KiB/300.0 KiB\n"},
		{"piped", filepath.Join(local, "f.bin"), id + ":" + remoteDir + "/g.bin", false, ""},
		{"nothing moved", id + ":" + remoteDir + "/nope", filepath.Join(local, "nope"), true, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ios, _, _, errOut := iostreams.Test()
			ios.SetStderrTTY(tt.tty)
			opts := &Options{IO: ios, Client: func() (*client.Client, error) { return client.New("http://" + e.HTTPAddr) },
				Src: tt.src, Dst: tt.dst, Attempts: 1}
			if err := cpRun(context.Background(), opts); (err != nil) != (tt.name == "nothing moved") {
				t.Fatal(err)
			}
			if got := errOut.String(); !strings.HasSuffix(got, tt.want) || (tt.want == "" && got != "") {
				t.Errorf("stderr %q; want it to end with %q", got, tt.want)
			}
		})
	}
}
