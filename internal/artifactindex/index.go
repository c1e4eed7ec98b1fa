package artifactindex

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
)

// Store is what the index needs of Falcon's store.
type Store interface {
	SyncArtifactFiles(ctx context.Context, artifactID string, upsert []store.ArtifactFile, remove []string, idx store.ArtifactIndex) error
	ListArtifactFiles(ctx context.Context, f store.ArtifactFileFilter) ([]store.ArtifactFile, string, error)
}

// Indexer refreshes artifact indexes. Refreshes of one artifact are
// serialised in the process, so a slow refresh started while the job ran
// cannot land after, and undo, the final one.
type Indexer struct {
	store Store
	open  *blobstore.Opener
	now   func() time.Time

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

// New returns an Indexer writing to st and reading buckets through open.
func New(st Store, open *blobstore.Opener, now func() time.Time) *Indexer {
	return &Indexer{store: st, open: open, now: now, locks: map[string]*sync.Mutex{}}
}

// Location is where an artifact's files are. It follows the rule jobs are
// rendered with (internal/provider/kube/render): a gs:// artifact path is
// where the job writes; otherwise a job on a cluster with a bucket writes
// to that bucket's conventional prefix; otherwise the path (a file://
// directory of falcon dev, or an absolute directory of older rows).
func Location(art *store.Artifact, clusterBucket string) (blobstore.Location, error) {
	if !strings.HasPrefix(art.Path, "gs://") && clusterBucket != "" {
		return blobstore.Parse("gcs_bucket", fmt.Sprintf("gs://%s/experiments/%s/artifacts/%s/", clusterBucket, art.ExpID, art.ID))
	}
	l, err := blobstore.Parse("artifact_path", art.Path)
	if err != nil {
		return blobstore.Location{}, errdefs.Precondition("artifact %s has no readable location (%v); it was created before artifacts had one", art.ID, err)
	}
	return l, nil
}

// Refresh brings the index of art, stored at loc, up to date and returns
// what it now holds. complete says the job can write no more (the
// experiment ended), which marks the index complete.
func (ix *Indexer) Refresh(ctx context.Context, art *store.Artifact, loc blobstore.Location, complete bool) (store.ArtifactIndex, error) {
	l := ix.lock(art.ID)
	l.Lock()
	defer l.Unlock()

	indexed := map[string]store.ArtifactFile{}
	for f := (store.ArtifactFileFilter{ArtifactID: art.ID, Hidden: true}); ; {
		page, next, err := ix.store.ListArtifactFiles(ctx, f)
		if err != nil {
			return store.ArtifactIndex{}, err
		}
		for _, p := range page {
			indexed[p.Path] = p
		}
		if next == "" {
			break
		}
		f.After = next
	}

	var upsert []store.ArtifactFile
	idx := store.ArtifactIndex{Complete: complete}
	seen := make(map[string]bool, len(indexed))
	err := ix.open.Walk(ctx, loc, func(f blobstore.File) error {
		seen[f.Path] = true
		// The counts are of what the job wrote: Falcon's own files under
		// .falcon/ are indexed but not counted.
		counted := !blobstore.IsHidden(f.Path)
		if counted {
			idx.Files++
			idx.Bytes += f.Size
		}
		old, ok := indexed[f.Path]
		same := ok && old.Size == f.Size && old.Updated.Equal(f.Updated.Truncate(time.Microsecond)) &&
			(f.Checksum == "" || f.Checksum == old.Checksum)
		if same {
			return nil
		}
		if f.Checksum == "" {
			sum, err := ix.open.Checksum(ctx, loc, f.Path)
			if err != nil {
				// Deleted between the walk and the read: the next
				// refresh drops it.
				if errors.Is(err, errdefs.ErrNotFound) {
					if counted {
						idx.Files--
						idx.Bytes -= f.Size
					}
					delete(seen, f.Path)
					return nil
				}
				return err
			}
			f.Checksum = sum
		}
		upsert = append(upsert, store.ArtifactFile{Path: f.Path, Size: f.Size, Checksum: f.Checksum, Updated: f.Updated})
		return nil
	})
	if err != nil {
		return store.ArtifactIndex{}, err
	}
	var remove []string
	for p := range indexed {
		if !seen[p] {
			remove = append(remove, p)
		}
	}
	at := ix.now().UTC()
	idx.At = &at
	if err := ix.store.SyncArtifactFiles(ctx, art.ID, upsert, remove, idx); err != nil {
		return store.ArtifactIndex{}, err
	}
	return idx, nil
}

func (ix *Indexer) lock(id string) *sync.Mutex {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	l, ok := ix.locks[id]
	if !ok {
		l = &sync.Mutex{}
		ix.locks[id] = l
	}
	return l
}

// Forget drops the lock of an artifact whose index is complete.
func (ix *Indexer) Forget(id string) {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	delete(ix.locks, id)
}
