package gcstest

import (
	"io"
	"net/http"
	"testing"

	"cloud.google.com/go/storage"
	"github.com/fsouza/fake-gcs-server/fakestorage"
	"google.golang.org/api/option"
)

// Server is a running fake GCS.
type Server struct {
	*fakestorage.Server
}

// Start starts a server holding the named (empty) buckets in memory; it
// stops when the test ends. dir, when set, keeps objects on disk instead,
// for tests that write more than memory should hold.
func Start(tb testing.TB, dir string, buckets ...string) *Server {
	tb.Helper()
	s, err := fakestorage.NewServerWithOptions(fakestorage.Options{
		Scheme: "http", Host: "127.0.0.1", StorageRoot: dir, Writer: io.Discard,
	})
	if err != nil {
		tb.Fatalf("gcstest: start fake-gcs-server: %v", err)
	}
	tb.Cleanup(s.Stop)
	for _, b := range buckets {
		s.CreateBucket(b)
	}
	return &Server{s}
}

// ClientOptions point the Cloud Storage client at the server, without
// credentials, over a plain loopback HTTP connection. Reads use the JSON
// API too: the client's default XML API download host would bypass the
// endpoint.
func (s *Server) ClientOptions() []option.ClientOption {
	return []option.ClientOption{
		option.WithEndpoint(s.URL() + "/storage/v1/"),
		storage.WithJSONReads(),
		option.WithoutAuthentication(),
		option.WithHTTPClient(&http.Client{}),
	}
}
