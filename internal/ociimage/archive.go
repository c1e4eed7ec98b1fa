package ociimage

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
)

// RefNameAnnotation names an image in an OCI layout's index.json.
const RefNameAnnotation = "org.opencontainers.image.ref.name"

// dockerManifest is one entry of a `docker save` manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// WriteArchive writes img to path as a tar holding an OCI image layout and
// a Docker-style manifest.json (see the package doc), naming the image
// repo:tag. Every entry is stamped mtime. The file is replaced atomically.
func WriteArchive(path string, img v1.Image, repo, tag string, mtime time.Time) error {
	dir, err := os.MkdirTemp("", "ociimage-layout-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return fmt.Errorf("ociimage: layout: %w", err)
	}
	if err := p.AppendImage(img, layout.WithAnnotations(map[string]string{RefNameAnnotation: tag})); err != nil {
		return fmt.Errorf("ociimage: layout: %w", err)
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	blob := func(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
	dm := dockerManifest{Config: blob(m.Config.Digest), RepoTags: []string{repo + ":" + tag}}
	for _, l := range m.Layers {
		dm.Layers = append(dm.Layers, blob(l.Digest))
	}
	b, err := json.Marshal([]dockerManifest{dm})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644); err != nil {
		return err
	}
	return packDir(dir, path, mtime.UTC().Truncate(time.Second))
}

// packDir tars the tree under dir into path, in name order with fixed
// owners, modes and times, so equal trees give equal bytes.
func packDir(dir, path string, mtime time.Time) error {
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		names = append(names, filepath.ToSlash(rel))
		return nil
	})
	if err != nil {
		return err
	}
	sort.Strings(names)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	tw := tar.NewWriter(tmp)
	for _, name := range names {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		h := &tar.Header{Name: name, ModTime: mtime, Mode: 0o644, Typeflag: tar.TypeReg, Size: fi.Size()}
		if fi.IsDir() {
			h.Name, h.Mode, h.Typeflag, h.Size = name+"/", 0o755, tar.TypeDir, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if !fi.IsDir() {
			if err := copyFile(tw, filepath.Join(dir, name)); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if strings.HasSuffix(path, string(filepath.Separator)) {
		return fmt.Errorf("ociimage: %s is a directory", path)
	}
	return os.Rename(tmp.Name(), path)
}

func copyFile(tw *tar.Writer, name string) error {
	f, err := os.Open(name)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(tw, f)
	return err
}
