package ociimage_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"

	"github.com/falconhq/falcon/internal/ociimage"
)

const testVersion = "v9.8.7-ocitest"

var testCreated = time.Date(2026, 11, 2, 3, 4, 5, 0, time.UTC)

// TestImageFromTheRealBinary is `make image` end to end: build the binary
// and the archive, load it the two ways registries' tools do, check what
// is inside, and run the binary from the unpacked filesystem.
func TestImageFromTheRealBinary(t *testing.T) {
	if _, err := os.Stat(ociimage.CABundle); err != nil {
		t.Fatalf("the build host needs a CA bundle: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	out := filepath.Join(t.TempDir(), "falcon-image.tar")
	var buildLog bytes.Buffer
	start := time.Now()
	res, err := ociimage.Make(ctx, ociimage.Options{
		ModuleDir: "../..",
		Out:       out,
		Version:   testVersion,
		Created:   testCreated,
		Stderr:    &buildLog,
	})
	if err != nil {
		t.Fatalf("Make: %v\n%s", err, buildLog.String())
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o644 {
		t.Errorf("%s has mode %s, want -rw-r--r--", out, fi.Mode())
	}
	t.Logf("built %s in %s: %s; compressed %.1f MiB (%d bytes), uncompressed %.1f MiB (%d bytes), archive %.1f MiB",
		res.Version, time.Since(start).Round(time.Second), res.Digest,
		mib(res.Compressed), res.Compressed, mib(res.Uncompressed), res.Uncompressed, mib(fi.Size()))

	if !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(res.Revision) {
		t.Errorf("revision %q is not a commit", res.Revision)
	}
	// The OCI layout side (skopeo, podman, containerd) is the image Make
	// built; the manifest.json side (crane push of the file, docker load)
	// has the same config and layers under a Docker manifest of its own.
	img := loadLayout(t, out)
	if d, err := img.Digest(); err != nil || d != res.Digest {
		t.Fatalf("layout image digest = %v, %v; Make said %v", d, err, res.Digest)
	}
	docker, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatalf("tarball.ImageFromPath: %v", err)
	}
	if diff := cmp.Diff(blobDigests(t, img), blobDigests(t, docker)); diff != "" {
		t.Fatalf("manifest.json names other blobs than index.json (-layout +manifest.json):\n%s", diff)
	}

	t.Run("config", func(t *testing.T) {
		cf, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		want := v1.Config{
			Entrypoint: []string{"/falcon"},
			User:       "65532:65532",
			WorkingDir: "/home/falcon",
			Env:        []string{"PATH=/", "HOME=/home/falcon", "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"},
			Labels: map[string]string{
				"org.opencontainers.image.title":    "falcon",
				"org.opencontainers.image.version":  testVersion,
				"org.opencontainers.image.revision": res.Revision,
				"org.opencontainers.image.source":   "https://github.com/falconhq/falcon",
				"org.opencontainers.image.created":  "2026-11-02T03:04:05Z",
			},
		}
		if diff := cmp.Diff(want, cf.Config); diff != "" {
			t.Errorf("config (-want +got):\n%s", diff)
		}
		if cf.OS != "linux" || cf.Architecture != "amd64" || !cf.Created.Time.Equal(testCreated) {
			t.Errorf("platform %s/%s created %s; want linux/amd64 created %s", cf.OS, cf.Architecture, cf.Created.Time, testCreated)
		}
		mt, _ := img.MediaType()
		if mt != types.OCIManifestSchema1 {
			t.Errorf("manifest media type %s, want %s", mt, types.OCIManifestSchema1)
		}
	})

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	t.Run("layers", func(t *testing.T) {
		if len(layers) != 2 {
			t.Fatalf("%d layers, want 2 (base, binary)", len(layers))
		}
		ca, err := os.ReadFile(ociimage.CABundle)
		if err != nil {
			t.Fatal(err)
		}
		base := layerEntries(t, layers[0])
		want := []header{
			{Name: "etc/", Mode: 0o755, Type: tar.TypeDir},
			{Name: "etc/group", Mode: 0o644, Type: tar.TypeReg},
			{Name: "etc/nsswitch.conf", Mode: 0o644, Type: tar.TypeReg},
			{Name: "etc/passwd", Mode: 0o644, Type: tar.TypeReg},
			{Name: "etc/ssl/", Mode: 0o755, Type: tar.TypeDir},
			{Name: "etc/ssl/certs/", Mode: 0o755, Type: tar.TypeDir},
			{Name: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Type: tar.TypeReg},
			{Name: "home/", Mode: 0o755, Type: tar.TypeDir},
			{Name: "home/falcon/", Mode: 0o700, UID: 65532, GID: 65532, Type: tar.TypeDir},
			{Name: "tmp/", Mode: 0o1777, Type: tar.TypeDir},
		}
		if diff := cmp.Diff(want, headers(base)); diff != "" {
			t.Errorf("base layer (-want +got):\n%s", diff)
		}
		files := map[string]string{}
		for _, e := range base {
			files[e.Name] = string(e.data)
			if !e.ModTime.Equal(testCreated) {
				t.Errorf("%s: mtime %s, want %s", e.Name, e.ModTime, testCreated)
			}
		}
		if !strings.Contains(files["etc/passwd"], "\nfalcon:x:65532:65532:falcon:/home/falcon:/sbin/nologin\n") {
			t.Errorf("/etc/passwd has no falcon user:\n%s", files["etc/passwd"])
		}
		if !strings.Contains(files["etc/group"], "\nfalcon:x:65532:\n") {
			t.Errorf("/etc/group has no falcon group:\n%s", files["etc/group"])
		}
		if files["etc/ssl/certs/ca-certificates.crt"] != string(ca) {
			t.Errorf("the CA bundle is not the build host's")
		}

		bin := layerEntries(t, layers[1])
		if diff := cmp.Diff([]header{{Name: "falcon", Mode: 0o755, Type: tar.TypeReg}}, headers(bin)); diff != "" {
			t.Fatalf("binary layer (-want +got):\n%s", diff)
		}
		checkStatic(t, bin[0].data)
		for i, l := range layers {
			mt, _ := l.MediaType()
			if mt != types.OCILayer {
				t.Errorf("layer %d media type %s, want %s", i, mt, types.OCILayer)
			}
		}
	})

	t.Run("runs", func(t *testing.T) {
		if runtime.GOOS != "linux" || runtime.GOARCH != "amd64" {
			t.Skipf("the image is linux/amd64; this is %s/%s", runtime.GOOS, runtime.GOARCH)
		}
		root := t.TempDir()
		extract(t, img, root)
		cmd := exec.Command(filepath.Join(root, "falcon"), "version", "-o", "json")
		cmd.Env = []string{"HOME=" + root}
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("falcon version: %v", err)
		}
		var v struct {
			Version string `json:"version"`
		}
		if err := json.Unmarshal(got, &v); err != nil || v.Version != testVersion {
			t.Fatalf("falcon version -o json = %s (%v); want version %q", got, err, testVersion)
		}
	})

	t.Run("reproducible", func(t *testing.T) {
		// Rebuilding the binary costs a minute; the Go toolchain already
		// promises the same bytes for the same inputs with -trimpath. What
		// this package adds (layers, config, archive) is rebuilt here from
		// the same binary and must come out byte for byte the same.
		layers, err := img.Layers()
		if err != nil {
			t.Fatal(err)
		}
		bin := layerEntries(t, layers[1])[0].data
		ca, err := os.ReadFile(ociimage.CABundle)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ociimage.Build(ociimage.Spec{Binary: bin, CACerts: ca, Arch: "amd64", Version: testVersion,
			Revision: res.Revision, Source: ociimage.DefaultSource, Created: testCreated})
		if err != nil {
			t.Fatal(err)
		}
		out2 := filepath.Join(t.TempDir(), "again.tar")
		if err := ociimage.WriteArchive(out2, again, "falcon", testVersion, testCreated); err != nil {
			t.Fatal(err)
		}
		if a, b := fileSum(t, out), fileSum(t, out2); a != b {
			t.Errorf("two archives of the same build differ: %x vs %x", a, b)
		}
	})
}

func TestSpecIsChecked(t *testing.T) {
	_, err := ociimage.Build(ociimage.Spec{})
	if err == nil {
		t.Fatal("Build of an empty spec succeeded")
	}
	for _, want := range []string{"no binary", "no CA certificates", "no architecture", "no version", "no creation time"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
}

func TestBadSourceDateEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	_, err := ociimage.Make(context.Background(), ociimage.Options{ModuleDir: "../..", Version: "v0", Out: filepath.Join(t.TempDir(), "x.tar")})
	if err == nil || !strings.Contains(err.Error(), `SOURCE_DATE_EPOCH "yesterday"`) {
		t.Fatalf("Make with a bad SOURCE_DATE_EPOCH: %v", err)
	}
}

// header is what the tests compare of a tar entry.
type header struct {
	Name     string
	Mode     int64
	UID, GID int
	Type     byte
}

type entry struct {
	header
	ModTime time.Time
	data    []byte
}

func headers(es []entry) []header {
	out := make([]header, len(es))
	for i, e := range es {
		out[i] = e.header
	}
	return out
}

func layerEntries(t *testing.T, l v1.Layer) []entry {
	t.Helper()
	rc, err := l.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var out []entry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, entry{header: header{Name: h.Name, Mode: h.Mode, UID: h.Uid, GID: h.Gid, Type: h.Typeflag}, ModTime: h.ModTime, data: data})
	}
}

// checkStatic fails unless the ELF asks for no dynamic loader and links no
// shared library: a scratch image has neither.
func checkStatic(t *testing.T, bin []byte) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		t.Fatalf("the binary is not ELF: %v", err)
	}
	if f.Machine != elf.EM_X86_64 {
		t.Errorf("ELF machine %s, want %s", f.Machine, elf.EM_X86_64)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("the binary has a %s program header: it is dynamically linked", p.Type)
		}
	}
	if s := f.Section(".dynamic"); s != nil {
		t.Errorf("the binary has a .dynamic section")
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("the binary imports %v", libs)
	}
}

// loadLayout unpacks the archive and reads it as an OCI image layout, the
// way skopeo's oci-archive: transport does.
func loadLayout(t *testing.T, archive string) v1.Image {
	t.Helper()
	dir := t.TempDir()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tr := tar.NewReader(f)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, h.Name)
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if h.Typeflag == tar.TypeDir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"oci-layout", "index.json", "manifest.json"} {
		if !contains(names, want) {
			t.Errorf("archive lacks %s: %v", want, names)
		}
	}
	p, err := layout.FromPath(dir)
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Manifests) != 1 {
		t.Fatalf("index.json lists %d manifests, want 1", len(im.Manifests))
	}
	if got := im.Manifests[0].Annotations[ociimage.RefNameAnnotation]; got != testVersion {
		t.Errorf("ref name %q, want %q", got, testVersion)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// extract writes the image's flattened filesystem under root.
func extract(t *testing.T, img v1.Image, root string) {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(root, filepath.FromSlash(h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, b, fs.FileMode(h.Mode).Perm()); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: unexpected tar type %c", h.Name, h.Typeflag)
		}
	}
}

// blobDigests are the config's and the layers' digests.
func blobDigests(t *testing.T, img v1.Image) []v1.Hash {
	t.Helper()
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	out := []v1.Hash{m.Config.Digest}
	for _, l := range m.Layers {
		out = append(out, l.Digest)
	}
	return out
}

func fileSum(t *testing.T, name string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
