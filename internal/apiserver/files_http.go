package apiserver

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
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
// larger and unusable by curl -o or a browser; this handler reads the same
// gRPC stream through the same interceptors (authentication, audit) and
// writes the bytes as they come, honouring a Range header so downloads
// resume.
const FilePathPrefix = "/v1/experiments/"

// fileHandler serves the raw file route and hands everything else to next.
func fileHandler(conn *grpc.ClientConn, next http.Handler) http.Handler {
	client := falconv1.NewArtifactServiceClient(conn)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id, escaped, ok := filePath(r)
		if !ok {
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
		md := metadata.MD{}
		for k, vs := range r.Header {
			if name, ok := forwardHeader(k); ok {
				md.Append(name, vs...)
			}
		}
		ctx := metadata.NewOutgoingContext(r.Context(), md)
		stream, err := client.ReadArtifactFile(ctx, &falconv1.ReadArtifactFileRequest{ExpId: id, Path: path, Offset: offset, Length: length})
		if err != nil {
			writeFileError(w, r, err)
			return
		}
		first, err := stream.Recv()
		if err != nil {
			writeFileError(w, r, err)
			return
		}
		f := first.GetFile()
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
		for msg := first; ; {
			if _, err := w.Write(msg.GetData()); err != nil {
				return // the client went away
			}
			msg, err = stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				// Too late for a status: cut the body short, so the client
				// sees fewer bytes than Content-Length and retries.
				panic(http.ErrAbortHandler)
			}
		}
	})
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
