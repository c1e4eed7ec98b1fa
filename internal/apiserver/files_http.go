package apiserver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/textproto"
	"net/url"
	"os"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"gocloud.dev/blob"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
)

// FilePathPrefix is where the HTTP server serves artifact files as raw
// bytes: GET /v1/experiments/{id}/files/{path}. grpc-gateway would relay
// ReadArtifactFile as newline-delimited JSON with base64 data, a third
// larger and unusable by curl -o or a browser. Instead the handler asks
// StatArtifactFile over the gateway's connection, so the caller goes
// through the same interceptors (authentication, access rules) as any
// call, and then copies the bytes from the store to the response itself:
// a second gRPC hop for every byte cost two thirds of the throughput. A
// Range header is honoured so downloads resume.
const FilePathPrefix = "/v1/experiments/"

// FileOpener opens length bytes (0: to the end) of an artifact file from
// offset, and describes it.
type FileOpener func(ctx context.Context, expID, path string, offset, length int64) (io.ReadCloser, *falconv1.ArtifactFile, error)

// fileCopyBytes is the buffer of one download: memory per reader.
const fileCopyBytes = 256 << 10

// fileHandler serves the raw file route and hands everything else to next.
func fileHandler(conn *grpc.ClientConn, open FileOpener, next http.Handler) http.Handler {
	client := falconv1.NewArtifactServiceClient(conn)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, escaped, ok := filePath(r)
		if !ok || open == nil {
			next.ServeHTTP(w, r)
			return
		}
		path, err := unescapePath(escaped)
		if err != nil {
			writeFileError(w, r, errdefs.Invalid("path", "%q is not a valid URL path: %v", escaped, err))
			return
		}
		offset, length, ranged, err := parseRange(r.Header.Get("Range"))
		if err != nil {
			writeFileError(w, r, err)
			return
		}
		// The access check (and the path check) of a call like any other.
		if _, err := client.StatArtifactFile(forwarded(r), &falconv1.StatArtifactFileRequest{ExpId: id, Path: path}); err != nil {
			writeFileError(w, r, err)
			return
		}
		rd, f, err := open(r.Context(), id, path, offset, length)
		if err != nil {
			writeFileError(w, r, errdefs.ToStatus(err))
			return
		}
		defer rd.Close()
		h := w.Header()
		h.Set("Content-Type", "application/octet-stream")
		h.Set("Accept-Ranges", "bytes")
		if f.GetChecksum() != "" {
			h.Set("ETag", strconv.Quote(f.GetChecksum()))
			h.Set("X-Falcon-Checksum", f.GetChecksum())
		}
		h.Set("Last-Modified", f.GetUpdated().AsTime().UTC().Format(http.TimeFormat))
		n := f.GetSize() - offset
		if length > 0 && length < n {
			n = length
		}
		h.Set("Content-Length", strconv.FormatInt(n, 10))
		if ranged {
			h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", offset, offset+n-1, f.GetSize()))
			w.WriteHeader(http.StatusPartialContent)
		} else {
			w.WriteHeader(http.StatusOK)
		}
		if r.Method == http.MethodHead {
			return
		}
		if _, err := io.CopyBuffer(w, io.LimitReader(sendfileSource(rd), n), make([]byte, fileCopyBytes)); err != nil && r.Context().Err() == nil {
			// Too late for a status: cut the body short, so the client
			// sees fewer bytes than Content-Length and resumes.
			panic(http.ErrAbortHandler)
		}
	})
}

// forwarded is r's context carrying the headers the gateway would forward
// (forwardHeader), so a call made for r authenticates as r's caller.
func forwarded(r *http.Request) context.Context {
	md := metadata.MD{}
	for k, vs := range r.Header {
		// grpc-gateway passes Authorization on as is (annotateContext);
		// its header matcher alone would prefix it, and the token would
		// not be seen.
		if textproto.CanonicalMIMEHeaderKey(k) == "Authorization" {
			md.Append("authorization", vs...)
			continue
		}
		if name, ok := forwardHeader(k); ok {
			md.Append(name, vs...)
		}
	}
	return metadata.NewOutgoingContext(r.Context(), md)
}

// sendfileSource is the local file under a file:// blob reader, when there
// is one: net/http then copies it to the socket with sendfile(2), without
// passing the bytes through user space. Anything else is read as is.
func sendfileSource(rd io.Reader) io.Reader {
	br, ok := rd.(*blob.Reader)
	if !ok {
		return rd
	}
	var under io.Reader
	if br.As(&under) {
		if f, ok := under.(*os.File); ok {
			return f
		}
	}
	return rd
}

// filePath recognises the raw file route: the experiment ID and the file's
// path as sent (still escaped).
func filePath(r *http.Request) (id, escaped string, ok bool) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), FilePathPrefix)
	id, escaped, isFile := strings.Cut(rest, "/files/")
	if !ok || !isFile || strings.Contains(id, "/") || (r.Method != http.MethodGet && r.Method != http.MethodHead) {
		return "", "", false
	}
	return id, escaped, true
}

// unescapePath decodes the URL path once, as any HTTP server would; the
// gRPC handler then refuses what would leave the artifact, decoded again or
// not.
func unescapePath(p string) (string, error) {
	return url.PathUnescape(p)
}

// parseRange reads a single "bytes=N-" or "bytes=N-M" range, the forms a
// resuming download sends. Other forms are refused, not ignored: a client
// that asked for part of a file must not be sent all of it as that part.
func parseRange(h string) (offset, length int64, ranged bool, err error) {
	if h == "" {
		return 0, 0, false, nil
	}
	spec, ok := strings.CutPrefix(h, "bytes=")
	from, to, dash := strings.Cut(spec, "-")
	if !ok || !dash || strings.Contains(spec, ",") || from == "" {
		return 0, 0, false, errdefs.Invalid("Range", "%q: only a single range bytes=N- or bytes=N-M is supported", h)
	}
	if offset, err = strconv.ParseInt(from, 10, 64); err != nil || offset < 0 {
		return 0, 0, false, errdefs.Invalid("Range", "%q: the start is not a byte offset", h)
	}
	if to != "" {
		end, err := strconv.ParseInt(to, 10, 64)
		if err != nil || end < offset {
			return 0, 0, false, errdefs.Invalid("Range", "%q: the end is not a byte offset at or after the start", h)
		}
		length = end - offset + 1
	}
	return offset, length, true, nil
}

// writeFileError answers as the gateway does: the HTTP status of the gRPC
// code and the status as JSON.
func writeFileError(w http.ResponseWriter, r *http.Request, err error) {
	st, ok := status.FromError(err)
	if !ok {
		st = status.New(errdefs.Code(err), err.Error())
	}
	if st.Code() == codes.Canceled && r.Context().Err() != nil {
		return
	}
	m := JSONMarshaler()
	body, merr := m.Marshal(st.Proto())
	if merr != nil {
		body = []byte(`{"code":13,"message":"encoding the error failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Del("Content-Length")
	w.WriteHeader(runtime.HTTPStatusFromCode(st.Code()))
	_, _ = w.Write(body)
}
