package client

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// ListArtifactFiles returns one page of an experiment's artifact files.
func (c *Client) ListArtifactFiles(ctx context.Context, req *falconv1.ListArtifactFilesRequest) (*falconv1.ListArtifactFilesResponse, error) {
	q := url.Values{}
	setString(q, "prefix", req.GetPrefix())
	if req.GetAll() {
		q.Set("all", "true")
	}
	setInt(q, "page_size", req.GetPageSize())
	setString(q, "page_token", req.GetPageToken())
	out := new(falconv1.ListArtifactFilesResponse)
	return out, c.do(ctx, http.MethodGet, idPath("/v1/experiments", req.GetExpId())+"/files", q, nil, out)
}

// FileReader is an artifact file's content as the server streams it.
type FileReader struct {
	io.ReadCloser
	// Size is the whole file's size; the reader holds Size - offset bytes.
	Size     int64
	Checksum string // "crc32c:<hex>", or "" when the store keeps none
	Updated  time.Time
	cancel   context.CancelFunc
}

// Close ends the download.
func (r *FileReader) Close() error {
	err := r.ReadCloser.Close()
	r.cancel()
	return err
}

// OpenArtifactFile starts reading an artifact file at offset, over the raw
// file route (bytes as they are, resumable by offset). The read has no
// overall timeout; cancel ctx or Close to stop it.
func (c *Client) OpenArtifactFile(ctx context.Context, expID, path string, offset int64) (*FileReader, error) {
	ctx, cancel := context.WithCancel(ctx)
	target := c.base.String() + idPath("/v1/experiments", expID) + "/files/" + escapePath(path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		cancel()
		return nil, status.Errorf(codes.InvalidArgument, "building request: %v", err)
	}
	if offset > 0 {
		req.Header.Set("Range", "bytes="+strconv.FormatInt(offset, 10)+"-")
	}
	if err := c.authorize(ctx, req); err != nil {
		cancel()
		return nil, err
	}
	resp, err := c.http.Do(req)
	if err != nil {
		cancel()
		return nil, c.transportError(ctx, err)
	}
	if resp.StatusCode/100 != 2 {
		defer cancel()
		return nil, c.refused(ctx, resp)
	}
	if offset > 0 && resp.StatusCode != http.StatusPartialContent {
		resp.Body.Close()
		cancel()
		return nil, status.Errorf(codes.Internal, "server %s ignored the range of a resumed download", c.base)
	}
	fr := &FileReader{ReadCloser: resp.Body, Size: resp.ContentLength + offset, Checksum: resp.Header.Get("X-Falcon-Checksum"), cancel: cancel}
	if cr := resp.Header.Get("Content-Range"); cr != "" {
		if _, total, ok := strings.Cut(cr, "/"); ok {
			if n, err := strconv.ParseInt(total, 10, 64); err == nil {
				fr.Size = n
			}
		}
	}
	fr.Updated, _ = http.ParseTime(resp.Header.Get("Last-Modified"))
	return fr, nil
}

// escapePath escapes each segment of a file path for a URL, keeping the
// slashes between them.
func escapePath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
		if s == "." || s == ".." {
			// Sent as is, Go's HTTP client and proxies resolve them away;
			// encoded, they reach the server, which refuses them by name.
			segs[i] = strings.ReplaceAll(s, ".", "%2E")
		}
	}
	return strings.Join(segs, "/")
}

// GetExpMetrics returns an experiment's metric summary (and series).
func (c *Client) GetExpMetrics(ctx context.Context, req *falconv1.GetExpMetricsRequest) (*falconv1.ExpMetrics, error) {
	q := url.Values{}
	for _, s := range req.GetSeries() {
		q.Add("series", s)
	}
	out := new(falconv1.ExpMetrics)
	return out, c.do(ctx, http.MethodGet, idPath("/v1/experiments", req.GetId())+"/metrics", q, nil, out)
}

// ExportExpLogs writes an experiment's logs to a bucket.
func (c *Client) ExportExpLogs(ctx context.Context, req *falconv1.ExportExpLogsRequest) (*falconv1.LogExportResult, error) {
	out := new(falconv1.LogExportResult)
	return out, c.do(ctx, http.MethodPost, idPath("/v1/experiments", req.GetId())+"/logs:export", nil, req, out)
}
