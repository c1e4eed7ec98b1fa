package apiserver

import (
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"github.com/grpc-ecosystem/grpc-gateway/v2/utilities"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/logjson"
)

// logsHandler serves GET /v1/experiments/{id}/logs exactly as the gateway
// would — the request parsed by grpc-gateway's own query parser, the call
// made over the gateway's connection through every interceptor, and the
// same newline-delimited {"result": {"lines": [...]}} chunks — but writes
// the JSON itself. protojson's reflection, for each of ten million lines of
// a 1 GiB log, was two thirds of the server's time.
func logsHandler(conn *grpc.ClientConn, next http.Handler) http.Handler {
	client := falconv1.NewExperimentServiceClient(conn)
	skip := &utilities.DoubleArray{Encoding: map[string]int{"id": 0}, Base: []int{1, 1, 0}, Check: []int{0, 1, 2}}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, FilePathPrefix)
		id, isLogs := strings.CutSuffix(rest, "/logs")
		if !ok || !isLogs || strings.Contains(id, "/") || r.Method != http.MethodGet {
			next.ServeHTTP(w, r)
			return
		}
		req := &falconv1.GetExpLogsRequest{Id: id}
		if err := runtime.PopulateQueryParameters(req, r.URL.Query(), skip); err != nil {
			writeFileError(w, r, errdefs.Invalid("query", "%v", err))
			return
		}
		stream, err := client.GetExpLogs(forwarded(r), req)
		if err == nil {
			var first *falconv1.LogLines
			if first, err = stream.Recv(); err == nil || errors.Is(err, io.EOF) {
				serveLogChunks(w, stream, first)
				return
			}
		}
		// Before any line, an error also sets the response's status, as
		// the gateway answers a stream that fails at once.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(runtime.HTTPStatusFromCode(status.Code(err)))
		writeStreamError(w, err)
	})
}

// serveLogChunks writes the stream's batches as they come, from first.
func serveLogChunks(w http.ResponseWriter, stream grpc.ServerStreamingClient[falconv1.LogLines], first *falconv1.LogLines) {
	{
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Transfer-Encoding", "chunked")
		w.WriteHeader(http.StatusOK)
		flusher, _ := w.(http.Flusher)
		buf := make([]byte, 0, 512<<10)
		for msg := first; msg != nil; {
			buf = logjson.AppendChunk(buf[:0], msg)
			if _, err := w.Write(buf); err != nil {
				return
			}
			if flusher != nil {
				flusher.Flush()
			}
			var err error
			msg, err = stream.Recv()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				writeStreamError(w, err)
				return
			}
		}
	}
}

// writeStreamError ends a stream with the gateway's error chunk.
func writeStreamError(w io.Writer, err error) {
	st, _ := status.FromError(err)
	body, merr := JSONMarshaler().Marshal(st.Proto())
	if merr != nil {
		return
	}
	_, _ = w.Write(append(append([]byte(`{"error":`), body...), "}\n"...))
}
