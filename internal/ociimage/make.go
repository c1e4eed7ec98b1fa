package ociimage

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// VersionPackage holds the variable `falcon version` reports, set with -X.
const VersionPackage = "github.com/falconhq/falcon/internal/cli/cmd/version"

// DefaultSource is the repository the image's source label names.
const DefaultSource = "https://github.com/falconhq/falcon"

// Options configure Make. Empty fields take the defaults Make documents.
type Options struct {
	// ModuleDir is the root of the Falcon module (default: the current
	// directory).
	ModuleDir string
	// Out is the archive to write (default bin/falcon-image.tar under
	// ModuleDir).
	Out string
	// Version is stamped into the binary and the labels and is the tag
	// (default: `git describe --tags --always --dirty`).
	Version string
	// Arch is the GOARCH to build for (default amd64).
	Arch string
	// CACertsFile is the host's CA bundle (default CABundle).
	CACertsFile string
	// Source is the source label (default DefaultSource).
	Source string
	// Created stamps the image (default: $SOURCE_DATE_EPOCH, else the
	// commit's time).
	Created time.Time
	// Stderr receives the go build's output (default os.Stderr).
	Stderr io.Writer
}

// Result describes what Make wrote.
type Result struct {
	Path    string
	Digest  v1.Hash // the manifest's
	Version string
	// Revision is the commit the source label points at.
	Revision string
	// Compressed is what a registry stores (layers as pushed, config and
	// manifest); Uncompressed the layers' tar bytes, about the size on a
	// node's disk.
	Compressed, Uncompressed int64
}

// Make is `make image`: it builds the static binary with the version
// stamped, assembles the image and writes the archive.
func Make(ctx context.Context, o Options) (*Result, error) {
	if o.ModuleDir == "" {
		o.ModuleDir = "."
	}
	dir, err := filepath.Abs(o.ModuleDir)
	if err != nil {
		return nil, err
	}
	if o.Out == "" {
		o.Out = filepath.Join(dir, "bin", "falcon-image.tar")
	}
	if o.Arch == "" {
		o.Arch = "amd64"
	}
	if o.CACertsFile == "" {
		o.CACertsFile = CABundle
	}
	if o.Source == "" {
		o.Source = DefaultSource
	}
	if o.Stderr == nil {
		o.Stderr = os.Stderr
	}
	if o.Version == "" {
		if o.Version, err = git(ctx, dir, "describe", "--tags", "--always", "--dirty"); err != nil {
			return nil, fmt.Errorf("ociimage: version: %w (set VERSION)", err)
		}
	}
	revision, err := git(ctx, dir, "rev-parse", "HEAD")
	if err != nil {
		return nil, fmt.Errorf("ociimage: revision: %w", err)
	}
	if o.Created.IsZero() {
		if o.Created, err = sourceDate(ctx, dir, os.Getenv("SOURCE_DATE_EPOCH")); err != nil {
			return nil, err
		}
	}
	ca, err := os.ReadFile(o.CACertsFile)
	if err != nil {
		return nil, fmt.Errorf("ociimage: CA certificates: %w (install ca-certificates, or pass another bundle)", err)
	}

	tmp, err := os.MkdirTemp("", "ociimage-bin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	binPath := filepath.Join(tmp, "falcon")
	if err := BuildBinary(ctx, dir, binPath, o.Version, o.Arch, o.Stderr); err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(binPath)
	if err != nil {
		return nil, err
	}
	img, err := Build(Spec{Binary: bin, CACerts: ca, Arch: o.Arch, Version: o.Version, Revision: revision, Source: o.Source, Created: o.Created})
	if err != nil {
		return nil, err
	}
	if err := WriteArchive(o.Out, img, "falcon", o.Version, o.Created); err != nil {
		return nil, err
	}
	res := &Result{Path: o.Out, Version: o.Version, Revision: revision}
	if res.Digest, err = img.Digest(); err != nil {
		return nil, err
	}
	if res.Compressed, res.Uncompressed, err = Sizes(img); err != nil {
		return nil, err
	}
	return res, nil
}

// BuildBinary builds ./cmd/falcon in moduleDir into out: static
// (CGO_ENABLED=0), for linux/arch, without local paths (-trimpath) or
// symbols (-s -w), with version stamped.
func BuildBinary(ctx context.Context, moduleDir, out, version, arch string, stderr io.Writer) error {
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath",
		"-ldflags", "-s -w -X "+VersionPackage+".Version="+version,
		"-o", out, "./cmd/falcon")
	cmd.Dir = moduleDir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("ociimage: go build: %w", err)
	}
	return nil
}

// Sizes adds up the image's blobs as a registry stores them (compressed)
// and its layers unpacked (uncompressed).
func Sizes(img v1.Image) (compressed, uncompressed int64, err error) {
	m, err := img.Manifest()
	if err != nil {
		return 0, 0, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return 0, 0, err
	}
	compressed = m.Config.Size + int64(len(raw))
	layers, err := img.Layers()
	if err != nil {
		return 0, 0, err
	}
	for _, l := range layers {
		n, err := l.Size()
		if err != nil {
			return 0, 0, err
		}
		compressed += n
		rc, err := l.Uncompressed()
		if err != nil {
			return 0, 0, err
		}
		u, err := io.Copy(io.Discard, rc)
		rc.Close()
		if err != nil {
			return 0, 0, err
		}
		uncompressed += u
	}
	return compressed, uncompressed, nil
}

// sourceDate is SOURCE_DATE_EPOCH when set (the reproducible-builds
// convention), else the time of the commit checked out in dir.
func sourceDate(ctx context.Context, dir, epoch string) (time.Time, error) {
	if epoch == "" {
		var err error
		if epoch, err = git(ctx, dir, "log", "-1", "--format=%ct"); err != nil {
			return time.Time{}, fmt.Errorf("ociimage: commit time: %w (set SOURCE_DATE_EPOCH)", err)
		}
	}
	sec, err := strconv.ParseInt(epoch, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("ociimage: SOURCE_DATE_EPOCH %q is not a count of seconds since 1970", epoch)
	}
	return time.Unix(sec, 0).UTC(), nil
}

func git(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "git", args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(string(out)), nil
}
