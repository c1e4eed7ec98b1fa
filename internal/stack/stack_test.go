package stack

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"
)

func TestCheckLoopback(t *testing.T) {
	tests := []struct {
		addr     string
		insecure bool
		ok       bool
	}{
		{"127.0.0.1:7070", false, true},
		{"[::1]:7070", false, true},
		{"localhost:7070", false, true},
		{"0.0.0.0:7070", false, false},
		{":7070", false, false},
		{"10.0.0.5:7070", false, false},
		{"0.0.0.0:7070", true, true},
		{"nonsense", false, false},
	}
	for _, tt := range tests {
		err := checkLoopback("--http-addr", tt.addr, tt.insecure, "falcon dev")
		if (err == nil) != tt.ok {
			t.Errorf("checkLoopback(%q, %v) = %v, want ok=%v", tt.addr, tt.insecure, err, tt.ok)
		}
	}
}

func TestLockDirIsExclusive(t *testing.T) {
	dir := t.TempDir()
	unlock, err := lockDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lockDir(dir); err == nil {
		t.Fatal("a second lock on the same data dir succeeded")
	}
	unlock()
	again, err := lockDir(dir)
	if err != nil {
		t.Fatalf("lock after unlock: %v", err)
	}
	again()
}

// TestDevServesProfilerOnlyWhenAsked runs falcon dev in-process twice: the
// profiler is mounted with Pprof and absent without it, while /metrics and
// /readyz are always there.
func TestDevServesProfilerOnlyWhenAsked(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("pprof=", on), func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			addr := make(chan string, 1)
			done := make(chan error, 1)
			go func() {
				done <- Dev(ctx, DevConfig{DataDir: t.TempDir(), HTTPAddr: "127.0.0.1:0", GRPCAddr: "127.0.0.1:0", Pprof: on,
					Interval: 100 * time.Millisecond, Ready: func(h, _ string) { addr <- h }})
			}()
			t.Cleanup(func() { cancel(); <-done })
			var base string
			select {
			case base = <-addr:
			case err := <-done:
				t.Fatal(err)
			}
			get := func(path string) int {
				resp, err := http.Get("http://" + base + path)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				return resp.StatusCode
			}
			wantProf := http.StatusNotFound
			if on {
				wantProf = http.StatusOK
			}
			if code := get("/debug/pprof/"); code != wantProf {
				t.Errorf("/debug/pprof/: %d, want %d", code, wantProf)
			}
			if code := get("/metrics"); code != http.StatusOK {
				t.Errorf("/metrics: %d", code)
			}
			for deadline := time.Now().Add(10 * time.Second); get("/readyz") != http.StatusOK; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("/readyz never became ready")
				}
			}
		})
	}
}
