package apiserver

import (
	"context"
	"encoding/base64"
	"errors"
	"io"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/artifactindex"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// indexFreshness is how old a running experiment's index may be before a
// listing refreshes it first: `ls` while a job writes shows what is there
// now, without walking the bucket on every page of one listing.
const indexFreshness = 2 * time.Second

// chunkBytes is one ArtifactChunk: large enough that framing costs
// nothing, small enough that a stream holds little memory per reader.
const chunkBytes = 256 << 10

// experimentFiles is an experiment with its artifact and where its files
// are.
type experimentFiles struct {
	exp *store.Experiment
	art *store.Artifact
	loc blobstore.Location
	// backend is that of the cluster the experiment was placed on; empty
	// when it was never placed or the cluster is gone.
	backend string
}

func (s *Server) experimentFiles(ctx context.Context, expID string) (*experimentFiles, error) {
	if err := checkID("exp_id", ids.Experiment, expID); err != nil {
		return nil, err
	}
	exp, err := s.store.GetExp(ctx, expID)
	if err != nil {
		return nil, err
	}
	return s.filesOf(ctx, exp)
}

// filesOf is experimentFiles for an experiment already read.
func (s *Server) filesOf(ctx context.Context, exp *store.Experiment) (*experimentFiles, error) {
	arts, _, err := s.store.ListArtifacts(ctx, store.ArtifactFilter{ExpID: exp.ID, Page: store.Page{Size: 1}})
	if err != nil {
		return nil, err
	}
	if len(arts) == 0 {
		return nil, errdefs.NotFoundf("experiment %s has no artifact", exp.ID)
	}
	c, err := s.placedOn(ctx, exp)
	if err != nil {
		return nil, err
	}
	loc, err := artifactindex.Location(arts[0], c.GCSBucket)
	if err != nil {
		return nil, err
	}
	return &experimentFiles{exp: exp, art: arts[0], loc: loc, backend: c.Backend}, nil
}

// placedOn is the cluster the experiment's jobs were placed on; an empty
// one when they never were or the cluster was deleted since (the artifact
// path is then all there is).
func (s *Server) placedOn(ctx context.Context, exp *store.Experiment) (*store.Cluster, error) {
	if exp.ClusterName == "" {
		return &store.Cluster{}, nil
	}
	c, err := s.store.GetCluster(ctx, exp.ClusterName)
	if errors.Is(err, errdefs.ErrNotFound) {
		return &store.Cluster{}, nil
	}
	return c, err
}

// jobBucket is the bucket of the cluster the experiment's jobs were placed
// on, where they write unless their artifact path names a gs:// location.
func (s *Server) jobBucket(ctx context.Context, exp *store.Experiment) (string, error) {
	c, err := s.placedOn(ctx, exp)
	if err != nil {
		return "", err
	}
	return c.GCSBucket, nil
}

// DefaultStopGrace is how long the pods of a stopped Kubernetes Job may
// still write after their experiment ended: their termination grace
// period (render.TerminationGracePeriod, which a test keeps equal).
const DefaultStopGrace = 60 * time.Second

// WithStopGrace sets how long after an experiment that did not succeed
// ended its results are still read as they may change (DefaultStopGrace).
func WithStopGrace(d time.Duration) Option { return func(s *Server) { s.stopGrace = d } }

// settled says whether the experiment's jobs can write no more, so that a
// read of its results is final (the index complete and never walked
// again, the metrics' sources read to their end): it ended, and either it
// succeeded (every pod ended by itself), or its cluster's stop returns
// only once the processes are gone (local), or the pods Falcon stopped
// have had their grace period (stopGrace) since it ended. When it has not
// settled yet, at is when it will.
func (s *Server) settled(exp *store.Experiment, backend string) (ok bool, at time.Time) {
	if !lifecycle.ExperimentMachine.IsTerminal(exp.Status) {
		return false, time.Time{}
	}
	if exp.Status == lifecycle.Succeeded || backend == localBackend || exp.FinishedAt == nil {
		return true, time.Time{}
	}
	at = exp.FinishedAt.Add(s.stopGrace)
	return !s.now().Before(at), at
}

// refreshIndex brings the index up to date where it may be stale: always
// once after the experiment settled (then never again), and before that
// when the last refresh is older than indexFreshness.
func (s *Server) refreshIndex(ctx context.Context, f *experimentFiles) error {
	if f.art.Index.Complete {
		return nil
	}
	final, _ := s.settled(f.exp, f.backend)
	if !final && f.art.Index.At != nil && s.now().Sub(*f.art.Index.At) < indexFreshness {
		return nil
	}
	if final {
		// The complete index is never walked again: Falcon's own copy of
		// the spec must be there first.
		if err := s.ensureSpecCopy(ctx, f); err != nil {
			s.log.Warn("copy of the experiment's spec not written", "exp", f.exp.ID, "err", err)
		}
	}
	idx, err := s.index.Refresh(ctx, f.art, f.loc, final)
	if err != nil {
		return err
	}
	f.art.Index = idx
	if final {
		s.index.Forget(f.art.ID)
	}
	return nil
}

// ListArtifactFiles lists the files of an experiment's artifact from the
// index, refreshed first where it may be stale.
func (s *Server) ListArtifactFiles(ctx context.Context, req *falconv1.ListArtifactFilesRequest) (*falconv1.ListArtifactFilesResponse, error) {
	prefix, err := blobstore.Rel("prefix", req.GetPrefix(), true)
	if err != nil {
		return nil, err
	}
	if req.GetPrefix() != "" && prefix == "" {
		prefix = req.GetPrefix() // "./" and the like: everything
	}
	size, err := pageSize(req.GetPageSize())
	if err != nil {
		return nil, err
	}
	after := ""
	if t := req.GetPageToken(); t != "" {
		b, err := base64.RawURLEncoding.DecodeString(t)
		if err != nil || len(b) == 0 {
			return nil, errdefs.Invalid("page_token", "is not a token this server issued")
		}
		after = string(b)
	}
	f, err := s.experimentFiles(ctx, req.GetExpId())
	if err != nil {
		return nil, err
	}
	// Only a listing's first page refreshes: the pages after it continue
	// that one view of the bucket. (Refreshing on every page, a refresh of
	// 10^5 files outlasting indexFreshness made each page walk it again.)
	if after == "" {
		if err := s.refreshIndex(ctx, f); err != nil {
			return nil, err
		}
	}
	items, next, err := s.store.ListArtifactFiles(ctx, store.ArtifactFileFilter{
		ArtifactID: f.art.ID, Prefix: prefix, Hidden: req.GetAll(), After: after, Limit: int(size),
	})
	if err != nil {
		return nil, err
	}
	resp := &falconv1.ListArtifactFilesResponse{
		Items:    make([]*falconv1.ArtifactFile, 0, len(items)),
		Complete: f.art.Index.Complete,
	}
	if next != "" {
		resp.NextPageToken = base64.RawURLEncoding.EncodeToString([]byte(next))
	}
	for _, it := range items {
		resp.Items = append(resp.Items, &falconv1.ArtifactFile{Path: it.Path, Size: it.Size, Checksum: it.Checksum, Updated: ts(it.Updated)})
	}
	return resp, nil
}

// openFile checks a read of one artifact file and opens it: the file's
// attributes (with the index's checksum where the store keeps none) and a
// reader of length bytes from offset (length 0: to the end).
func (s *Server) openFile(ctx context.Context, expID, path string, offset, length int64) (io.ReadCloser, *falconv1.ArtifactFile, error) {
	rel, err := blobstore.Rel("path", path, false)
	if err != nil {
		return nil, nil, err
	}
	if offset < 0 {
		return nil, nil, errdefs.Invalid("offset", "must not be negative, got %d", offset)
	}
	if length < 0 {
		return nil, nil, errdefs.Invalid("length", "must not be negative, got %d (0 reads to the end)", length)
	}
	f, err := s.experimentFiles(ctx, expID)
	if err != nil {
		return nil, nil, err
	}
	if length == 0 {
		length = -1
	}
	r, file, err := s.blobs.Open(ctx, f.loc, rel, offset, length)
	if err != nil {
		return nil, nil, err
	}
	return r, s.describe(ctx, f, file), nil
}

// describe is file as the API shows it, with the index's checksum where
// the store keeps none: the one `ls` showed, when it describes this very
// content.
func (s *Server) describe(ctx context.Context, f *experimentFiles, file blobstore.File) *falconv1.ArtifactFile {
	rel := file.Path
	if file.Checksum == "" {
		page, _, err := s.store.ListArtifactFiles(ctx, store.ArtifactFileFilter{ArtifactID: f.art.ID, Prefix: rel, Hidden: true, Limit: 1})
		if err == nil && len(page) == 1 && page[0].Path == rel && page[0].Size == file.Size && page[0].Updated.Equal(file.Updated.Truncate(time.Microsecond)) {
			file.Checksum = page[0].Checksum
		}
	}
	return &falconv1.ArtifactFile{Path: rel, Size: file.Size, Checksum: file.Checksum, Updated: ts(file.Updated)}
}

// StatArtifactFile describes one artifact file.
func (s *Server) StatArtifactFile(ctx context.Context, req *falconv1.StatArtifactFileRequest) (*falconv1.ArtifactFile, error) {
	rel, err := blobstore.Rel("path", req.GetPath(), false)
	if err != nil {
		return nil, err
	}
	f, err := s.experimentFiles(ctx, req.GetExpId())
	if err != nil {
		return nil, err
	}
	file, err := s.blobs.Stat(ctx, f.loc, rel)
	if err != nil {
		return nil, err
	}
	return s.describe(ctx, f, file), nil
}

// ReadArtifactFile streams one file's bytes from the store, chunkBytes at a
// time, so a reader of any size costs the server one chunk of memory.
func (s *Server) ReadArtifactFile(req *falconv1.ReadArtifactFileRequest, stream falconv1.ArtifactService_ReadArtifactFileServer) error {
	r, file, err := s.openFile(stream.Context(), req.GetExpId(), req.GetPath(), req.GetOffset(), req.GetLength())
	if err != nil {
		return err
	}
	defer r.Close()
	first := &falconv1.ArtifactChunk{File: file}
	buf := make([]byte, chunkBytes)
	for {
		n, err := io.ReadFull(r, buf)
		if n > 0 || first != nil {
			msg := first
			if msg == nil {
				msg = &falconv1.ArtifactChunk{}
			}
			first = nil
			msg.Data = buf[:n]
			if err := stream.Send(msg); err != nil {
				return err
			}
		}
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			return nil
		case err != nil:
			return blobstore.Err(file.GetPath(), err)
		}
	}
}
