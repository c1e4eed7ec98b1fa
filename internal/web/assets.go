package web

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strconv"
)

//go:embed assets
var assetFS embed.FS

// asset is one embedded file and the version its URL carries.
type asset struct {
	body    []byte
	version string // the first 12 hex digits of its SHA-256
	ctype   string
}

// assets are read once: they are part of the binary.
var assets = func() map[string]asset {
	out := map[string]asset{}
	entries, err := fs.ReadDir(assetFS, "assets")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		b, err := assetFS.ReadFile("assets/" + e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		out[e.Name()] = asset{body: b, version: hex.EncodeToString(sum[:6]), ctype: mime.TypeByExtension(path.Ext(e.Name()))}
	}
	return out
}()

// AssetSizes are the bytes of each asset the dashboard serves, by name, for
// the figures in docs/benchmarks.md.
func AssetSizes() map[string]int {
	out := map[string]int{}
	for name, a := range assets {
		out[name] = len(a.body)
	}
	return out
}

// assetURL is the URL of an asset with its version, so a new binary's
// assets are fetched again while an unchanged one is cached for good.
func assetURL(name string) string {
	a, ok := assets[name]
	if !ok {
		panic("web: no asset " + name)
	}
	return Prefix + "assets/" + name + "?v=" + a.version
}

func (h *Handler) serveAsset(w http.ResponseWriter, r *http.Request) {
	a, ok := assets[r.PathValue("name")]
	if !ok {
		h.fail(w, r, httpError{http.StatusNotFound, "Not found", "No asset " + r.PathValue("name") + "."})
		return
	}
	hd := w.Header()
	hd.Set("Content-Type", a.ctype)
	hd.Set("Content-Length", strconv.Itoa(len(a.body)))
	hd.Set("ETag", strconv.Quote(a.version))
	if r.URL.Query().Get("v") == a.version {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	if r.Header.Get("If-None-Match") == strconv.Quote(a.version) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	if r.Method == http.MethodHead {
		return
	}
	_, _ = w.Write(a.body)
}
