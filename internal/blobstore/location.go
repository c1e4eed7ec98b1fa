package blobstore

import (
	"net/url"
	"path"
	"path/filepath"
	"strings"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Location is a parsed storage URI.
type Location struct {
	Scheme string // "gs" or "file"
	Bucket string // the gs:// bucket; empty for file://
	// Prefix is the key prefix inside the bucket, without a leading slash
	// and, unless empty, with a trailing one.
	Prefix string
}

// String is the location as a URI.
func (l Location) String() string {
	if l.Scheme == "file" {
		// Escaped where a URI reads the path differently, so that Parse
		// gives this location back: a data dir may be named "run#2".
		return "file:///" + uriPath.Replace(l.Prefix)
	}
	return "gs://" + l.Bucket + "/" + l.Prefix
}

// uriPath escapes what would end a file:// URI's path or change it.
var uriPath = strings.NewReplacer("%", "%25", "#", "%23", "?", "%3F")

// Join is the location of rel under l (rel already checked by Rel).
func (l Location) Join(rel string) Location {
	l.Prefix = dirPrefix(l.Prefix + strings.Trim(rel, "/"))
	return l
}

// Parse reads a gs:// or file:// URI, or an absolute directory (taken as
// file://). field names the flag or field the URI came from, for errors.
func Parse(field, uri string) (Location, error) {
	if uri == "" {
		return Location{}, errdefs.Invalid(field, "is required: gs://bucket/prefix, or file:///dir (or an absolute directory)")
	}
	if filepath.IsAbs(uri) {
		return Location{Scheme: "file", Prefix: dirPrefix(strings.TrimPrefix(filepath.ToSlash(filepath.Clean(uri)), "/"))}, nil
	}
	u, err := url.Parse(uri)
	if err != nil {
		return Location{}, errdefs.Invalid(field, "%q is not a URI: %v", uri, err)
	}
	switch u.Scheme {
	case "gs":
		if !validBucket(u.Host) {
			return Location{}, errdefs.Invalid(field, "%q does not name a valid bucket: 3-63 lowercase letters, digits, '-', '_' and '.', starting and ending with a letter or digit", uri)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return Location{}, errdefs.Invalid(field, "%q: a gs:// location takes no query or fragment", uri)
		}
		p := strings.TrimPrefix(u.Path, "/")
		if p != "" && path.Clean(p) != strings.TrimSuffix(p, "/") {
			return Location{}, errdefs.Invalid(field, "%q: the prefix must be clean (no '.', '..' or empty segments)", uri)
		}
		return Location{Scheme: "gs", Bucket: u.Host, Prefix: dirPrefix(p)}, nil
	case "file":
		if u.Host != "" && u.Host != "localhost" {
			return Location{}, errdefs.Invalid(field, "%q: a file:// URI names a local directory, as file:///abs/dir", uri)
		}
		if !path.IsAbs(u.Path) {
			return Location{}, errdefs.Invalid(field, "%q: a file:// URI needs an absolute path, as file:///abs/dir", uri)
		}
		if u.RawQuery != "" || u.Fragment != "" || u.ForceQuery || strings.HasSuffix(uri, "#") {
			// Dropping them would name another directory: "#" and "?" in a
			// directory's name are %23 and %3F in its URI.
			return Location{}, errdefs.Invalid(field, "%q: a file:// URI takes no query or fragment; write '#' and '?' in a directory name as %%23 and %%3F, or give the absolute directory", uri)
		}
		return Location{Scheme: "file", Prefix: dirPrefix(strings.TrimPrefix(path.Clean(u.Path), "/"))}, nil
	default:
		return Location{}, errdefs.Invalid(field, "%q: the scheme must be gs:// or file://", uri)
	}
}

// dirPrefix makes p a directory prefix: "" stays "", anything else ends in
// exactly one slash.
func dirPrefix(p string) string {
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return ""
	}
	return p + "/"
}

// validBucket is GCS's rule for a bucket name, without the dotted-name
// length detail (a dotted name may be longer; such buckets are rare and GCS
// itself says no to a bad one).
func validBucket(b string) bool {
	if len(b) < 3 || len(b) > 222 {
		return false
	}
	for i, c := range b {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || (c == '-' || c == '_' || c == '.') && i > 0 && i < len(b)-1
		if !ok {
			return false
		}
	}
	return true
}

// Rel checks a path inside an artifact as a user gave it and returns it
// clean. Anything that, once percent-decoded (as often as it decodes),
// is absolute, climbs out with "..", holds a backslash or a NUL, or is
// empty, is refused with InvalidArgument naming field and the path: such
// names come from URLs and shells, where "%2e%2e/" and "..\\" are the
// usual ways out. An empty path is allowed only when allowEmpty (a listing
// of everything).
func Rel(field, p string, allowEmpty bool) (string, error) {
	bad := func(why string) (string, error) {
		return "", errdefs.Invalid(field, "%q %s; paths are relative to the experiment's artifact, as in `falcon artifact ls`", p, why)
	}
	if p == "" {
		if allowEmpty {
			return "", nil
		}
		return bad("is empty")
	}
	forms := []string{p}
	for d := p; ; {
		next, err := url.PathUnescape(d)
		if err != nil || next == d {
			break
		}
		forms = append(forms, next)
		d = next
	}
	for _, f := range forms {
		switch {
		case strings.ContainsRune(f, 0):
			return bad("contains a NUL byte")
		case strings.Contains(f, "\\"):
			return bad("contains a backslash")
		case strings.HasPrefix(f, "/"):
			return bad("is absolute")
		}
		for _, seg := range strings.Split(f, "/") {
			if seg == ".." {
				return bad("leaves the artifact ('..')")
			}
		}
	}
	trailing := strings.HasSuffix(p, "/")
	clean := path.Clean(p)
	if clean == "." {
		if allowEmpty {
			return "", nil
		}
		return bad("names no file")
	}
	if trailing {
		clean += "/"
	}
	return clean, nil
}

// IsHidden says whether rel is one of the files Falcon adds to an artifact
// itself (a copy of the config, say), which listings leave out unless asked.
func IsHidden(rel string) bool { return rel == HiddenDir || strings.HasPrefix(rel, HiddenDir+"/") }

// HiddenDir holds the files Falcon itself adds to an artifact.
const HiddenDir = ".falcon"
