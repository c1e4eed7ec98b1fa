package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// What the image holds and runs as.
const (
	// UID and GID of the user falcon, the same number as distroless's
	// nonroot, so policies written for that image fit this one.
	UID = 65532
	GID = 65532
	// User is the config's user: numeric, so Kubernetes' runAsNonRoot
	// can check it without reading /etc/passwd.
	User = "65532:65532"
	// Entrypoint is where the binary lives.
	Entrypoint = "/falcon"
	// Home is falcon's home and the working directory.
	Home = "/home/falcon"
	// CABundle is where the CA certificates are, the first path Go's
	// crypto/x509 looks at on Linux.
	CABundle = "/etc/ssl/certs/ca-certificates.crt"
)

// OCI annotation keys used as image labels.
const (
	LabelVersion  = "org.opencontainers.image.version"
	LabelRevision = "org.opencontainers.image.revision"
	LabelSource   = "org.opencontainers.image.source"
	LabelCreated  = "org.opencontainers.image.created"
	LabelTitle    = "org.opencontainers.image.title"
)

// Spec says what goes into the image.
type Spec struct {
	// Binary is the static falcon executable for OS linux and Arch.
	Binary []byte
	// CACerts is the PEM bundle written to CABundle.
	CACerts []byte
	// Arch is the GOARCH the binary was built for (amd64, arm64).
	Arch string
	// Version, Revision and Source become the OCI labels.
	Version, Revision, Source string
	// Created stamps every file, the history and the config; truncated to
	// whole seconds.
	Created time.Time
}

func (s Spec) check() error {
	var errs []error
	if len(s.Binary) == 0 {
		errs = append(errs, errors.New("no binary"))
	}
	if len(s.CACerts) == 0 {
		errs = append(errs, errors.New("no CA certificates"))
	}
	if s.Arch == "" {
		errs = append(errs, errors.New("no architecture"))
	}
	if s.Version == "" {
		errs = append(errs, errors.New("no version"))
	}
	if s.Created.IsZero() {
		errs = append(errs, errors.New("no creation time"))
	}
	return errors.Join(errs...)
}

// Build assembles the image: the base layer, the binary layer and the
// config. It does no I/O.
func Build(s Spec) (v1.Image, error) {
	if err := s.check(); err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	created := s.Created.UTC().Truncate(time.Second)
	base, err := layer(baseFiles(s.CACerts), created)
	if err != nil {
		return nil, err
	}
	bin, err := layer([]file{{name: Entrypoint[1:], mode: 0o755, data: s.Binary}}, created)
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	at := v1.Time{Time: created}
	img, err = mutate.Append(img,
		mutate.Addendum{Layer: base, History: v1.History{Created: at, CreatedBy: "ociimage: /etc/passwd, /etc/group, CA certificates, /tmp, " + Home}},
		mutate.Addendum{Layer: bin, History: v1.History{Created: at, CreatedBy: "ociimage: " + Entrypoint + " " + s.Version}},
	)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	cf = cf.DeepCopy()
	cf.Created = at
	cf.OS = "linux"
	cf.Architecture = s.Arch
	cf.Config = v1.Config{
		Entrypoint: []string{Entrypoint},
		User:       User,
		WorkingDir: Home,
		Env: []string{
			// The binary needs no PATH; a debugging `kubectl exec` does.
			"PATH=/",
			// The runtime sets HOME from /etc/passwd only for a named user.
			"HOME=" + Home,
			"SSL_CERT_FILE=" + CABundle,
		},
		Labels: map[string]string{
			LabelTitle:    "falcon",
			LabelVersion:  s.Version,
			LabelRevision: s.Revision,
			LabelSource:   s.Source,
			LabelCreated:  created.Format(time.RFC3339),
		},
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("ociimage: %w", err)
	}
	return img, nil
}

// file is one entry of a layer: a directory when data is nil and mode has
// fs.ModeDir.
type file struct {
	name     string
	mode     fs.FileMode
	uid, gid int
	data     []byte
}

// baseFiles is the base layer: what a static Go binary expects of a Linux
// root besides itself.
func baseFiles(caCerts []byte) []file {
	dir := func(name string, mode fs.FileMode) file { return file{name: name, mode: fs.ModeDir | mode} }
	return []file{
		dir("etc", 0o755),
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nfalcon:x:65532:\n")},
		// Go's resolver reads the order of files and DNS from here.
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"falcon:x:65532:65532:falcon:" + Home + ":/sbin/nologin\n")},
		dir("etc/ssl", 0o755),
		dir("etc/ssl/certs", 0o755),
		{name: CABundle[1:], mode: 0o644, data: caCerts},
		dir("home", 0o755),
		{name: Home[1:], mode: fs.ModeDir | 0o700, uid: UID, gid: GID},
		dir("tmp", fs.ModeSticky|0o777),
	}
}

// layer writes files as a tar with every time set to mtime, gzips it once
// at a fixed level (so the digest depends on the content alone), and wraps
// it as an OCI layer.
func layer(files []file, mtime time.Time) (v1.Layer, error) {
	var raw bytes.Buffer
	tw := tar.NewWriter(&raw)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name,
			Mode:    int64(f.mode.Perm()),
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: mtime,
		}
		if f.mode&fs.ModeSticky != 0 {
			h.Mode |= 0o1000 // c_ISVTX
		}
		if f.mode.IsDir() {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("ociimage: layer: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("ociimage: layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("ociimage: layer: %w", err)
	}
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw.Bytes()); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	blob := gz.Bytes()
	// Given gzipped bytes, the tarball package uses them as the
	// compressed blob as they are.
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(blob)), nil
	}, tarball.WithMediaType(types.OCILayer))
}
