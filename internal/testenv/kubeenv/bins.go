package kubeenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Binaries the harness runs, all found in one directory.
const (
	binEtcd       = "etcd"
	binAPIServer  = "kube-apiserver"
	binController = "kube-controller-manager"
	binScheduler  = "kube-scheduler"
	binKwok       = "kwok"
)

var binaries = []string{binEtcd, binAPIServer, binController, binScheduler, binKwok}

// EnvBinDir names a directory holding prebuilt binaries; it skips
// hack/kube-bins.sh entirely.
const EnvBinDir = "FALCON_KUBE_BIN"

const mainModule = "module github.com/falconhq/falcon\n"

var binDirOnce struct {
	sync.Mutex
	dir string
	err error
	did bool
}

// BinDir returns the directory holding etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok: $FALCON_KUBE_BIN if set,
// otherwise the cache directory that hack/kube-bins.sh prints, building the
// binaries first if the cache lacks them (minutes; logf is told how long it
// took). The answer is remembered for the life of the process.
func BinDir(ctx context.Context, logf func(format string, args ...any)) (string, error) {
	binDirOnce.Lock()
	defer binDirOnce.Unlock()
	if !binDirOnce.did {
		binDirOnce.dir, binDirOnce.err = findBinDir(ctx, logf)
		binDirOnce.did = binDirOnce.err == nil || ctx.Err() == nil
	}
	return binDirOnce.dir, binDirOnce.err
}

func findBinDir(ctx context.Context, logf func(string, ...any)) (string, error) {
	if dir := os.Getenv(EnvBinDir); dir != "" {
		if err := checkBinDir(dir); err != nil {
			return "", fmt.Errorf("%s: %w", EnvBinDir, err)
		}
		return dir, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "hack", "kube-bins.sh")
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(&stderr, os.Stderr) // a build shows its progress live
	start := time.Now()
	err = cmd.Run()
	took := time.Since(start)
	if err != nil {
		return "", fmt.Errorf("%s failed after %s: %w\n%s", script, took.Round(time.Second), err, lastLines(stderr.Bytes(), 40))
	}
	out := strings.TrimSpace(stdout.String())
	dir := out[strings.LastIndexByte(out, '\n')+1:]
	if err := checkBinDir(dir); err != nil {
		return "", fmt.Errorf("%s printed %q: %w", script, dir, err)
	}
	if stderr.Len() > 0 && logf != nil { // the script is silent on a cache hit
		logf("kubeenv: built control-plane binaries in %s (cached for next time in %s)", took.Round(time.Second), dir)
	}
	return dir, nil
}

func checkBinDir(dir string) error {
	var missing []string
	for _, b := range binaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			missing = append(missing, b)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s lacks %s", dir, strings.Join(missing, ", "))
	}
	return nil
}

// repoRoot walks up from the working directory (a package directory under
// go test) to Falcon's go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(data, []byte(mainModule)) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubeenv: no Falcon go.mod above the working directory; set " + EnvBinDir)
		}
		dir = parent
	}
}
