package blobstore

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"gocloud.dev/blob"
	"gocloud.dev/blob/fileblob"
	"gocloud.dev/blob/gcsblob"
	"gocloud.dev/gcerrors"
	"google.golang.org/api/option"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Opener opens the buckets behind locations and keeps them open: a GCS
// client holds connections and credentials, so each bucket gets one.
type Opener struct {
	gcsOptions []option.ClientOption

	mu      sync.Mutex
	gcs     *storage.Client
	buckets map[string]*blob.Bucket // "gs://name" or "file"
}

// Option configures an Opener.
type Option func(*Opener)

// WithGCSOptions passes options to the Cloud Storage client: none in
// production (Application Default Credentials, which are Workload
// Identity's on GKE); an endpoint and no authentication for a test server.
func WithGCSOptions(opts ...option.ClientOption) Option {
	return func(o *Opener) { o.gcsOptions = append(o.gcsOptions, opts...) }
}

// NewOpener returns an Opener; Close it to release its clients.
func NewOpener(opts ...Option) *Opener {
	o := &Opener{buckets: map[string]*blob.Bucket{}}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// Bucket returns the bucket holding l. Callers address keys as
// l.Prefix + rel.
func (o *Opener) Bucket(ctx context.Context, l Location) (*blob.Bucket, error) {
	key := "file"
	if l.Scheme == "gs" {
		key = "gs://" + l.Bucket
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if b, ok := o.buckets[key]; ok {
		return b, nil
	}
	var b *blob.Bucket
	var err error
	switch l.Scheme {
	case "gs":
		if o.gcs == nil {
			// JSON API reads: the same endpoint as every other call, so an
			// emulator (STORAGE_EMULATOR_HOST) or a private endpoint serves
			// downloads too, and ranges behave the same.
			opts := append([]option.ClientOption{storage.WithJSONReads()}, o.gcsOptions...)
			if o.gcs, err = storage.NewClient(ctx, opts...); err != nil {
				return nil, errdefs.Unavailable("cloud storage client: %v", err)
			}
		}
		b, err = gcsblob.OpenBucket(ctx, nil, l.Bucket, &gcsblob.Options{Client: o.gcs})
	case "file":
		// Rooted at "/" so any absolute directory is a key prefix. Falcon
		// writes no attribute sidecars: jobs write these directories
		// directly, so checksums are computed, never read from sidecars.
		b, err = fileblob.OpenBucket("/", &fileblob.Options{Metadata: fileblob.MetadataDontWrite, NoTempDir: true})
	default:
		return nil, errdefs.Invalid("location", "scheme %q is not gs or file", l.Scheme)
	}
	if err != nil {
		return nil, errdefs.Unavailable("open %s: %v", l, err)
	}
	o.buckets[key] = b
	return b, nil
}

// Close closes every bucket and the GCS client.
func (o *Opener) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	var errs []error
	for k, b := range o.buckets {
		errs = append(errs, b.Close())
		delete(o.buckets, k)
	}
	if o.gcs != nil {
		errs = append(errs, o.gcs.Close())
		o.gcs = nil
	}
	return errors.Join(errs...)
}

// File is one object under a location, by its path relative to it.
type File struct {
	Path     string
	Size     int64
	Checksum string // "crc32c:<8 hex digits>"; empty when the store keeps none
	Updated  time.Time
}

// Walk calls fn for every object under l, in key order (the order GCS and
// the index list them in).
func (o *Opener) Walk(ctx context.Context, l Location, fn func(File) error) error {
	b, err := o.Bucket(ctx, l)
	if err != nil {
		return err
	}
	// The first page is small and the next ones large on file://. fileblob
	// walks the whole tree again for every page, so its default of 1,000
	// keys a page made a listing of 10^5 files cost 10^7 directory entries.
	// But blob.ListPage allocates a slice of pageSize up front: 2^30
	// pointers (8 GiB, untouched but counted) left the GC's heap goal so
	// high that the server's RSS rose by 500 MiB on the next log read, and
	// even 2^17 (1 MiB) for each of the many small trees the server indexes
	// as experiments end was a tenth of all it allocated in a dispatch run.
	// Most trees fit the first page; a larger one costs one walk more. GCS
	// caps a page at 1,000 anyway.
	pageSize := 1000
	opts := &blob.ListOptions{Prefix: l.Prefix}
	for token := blob.FirstPageToken; ; {
		objs, next, err := b.ListPage(ctx, token, pageSize, opts)
		if err != nil {
			return Err(l.String(), err)
		}
		for _, obj := range objs {
			if obj.IsDir {
				continue
			}
			rel := strings.TrimPrefix(obj.Key, l.Prefix)
			f := File{Path: rel, Size: obj.Size, Updated: obj.ModTime.UTC(), Checksum: storedChecksum(obj.As)}
			if err := fn(f); err != nil {
				return err
			}
		}
		if len(next) == 0 {
			return nil
		}
		token = next
		if l.Scheme == "file" {
			pageSize = 1 << 17
		}
	}
}

// ChecksumPrefix starts every checksum Falcon reports. CRC32C (Castagnoli)
// is what Cloud Storage keeps for every object, composite ones included
// (MD5 it keeps only for objects uploaded whole), and what gcloud storage
// verifies; CPUs compute it in hardware, so a download that checks it
// costs no more than one that does not.
const ChecksumPrefix = "crc32c:"

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// NewHash returns the hash behind Falcon's checksums.
func NewHash() hash.Hash32 { return crc32.New(castagnoli) }

// FormatChecksum is a hash's sum as Falcon reports it.
func FormatChecksum(sum uint32) string { return fmt.Sprintf("%s%08x", ChecksumPrefix, sum) }

// storedChecksum is the checksum the store keeps, "" when it keeps none
// (file://).
func storedChecksum(as func(any) bool) string {
	var attrs storage.ObjectAttrs
	if as != nil && as(&attrs) && attrs.CRC32C != 0 {
		return FormatChecksum(attrs.CRC32C)
	}
	return ""
}

// Checksum reads the object and returns its checksum, for stores (file://)
// that keep none.
func (o *Opener) Checksum(ctx context.Context, l Location, rel string) (string, error) {
	b, err := o.Bucket(ctx, l)
	if err != nil {
		return "", err
	}
	r, err := b.NewReader(ctx, l.Prefix+rel, nil)
	if err != nil {
		return "", Err(rel, err)
	}
	defer r.Close()
	h := NewHash()
	// Through a buffer no larger than the object, capped at checksumBuffer:
	// io.Copy would take the reader's WriteTo, which allocates 1 MiB
	// whatever the object's size, and the server checksums every file of
	// each experiment that ends (its artifact index): 46 MB in 18 s of
	// BenchmarkKubeDispatch.
	buf := make([]byte, max(1, min(r.Size(), checksumBuffer)))
	if _, err := io.CopyBuffer(h, struct{ io.Reader }{r}, buf); err != nil {
		return "", Err(rel, err)
	}
	return FormatChecksum(h.Sum32()), nil
}

// checksumBuffer is the most Checksum reads at a time.
const checksumBuffer = 64 << 10

// Stat returns the attributes of rel under l.
func (o *Opener) Stat(ctx context.Context, l Location, rel string) (File, error) {
	b, err := o.Bucket(ctx, l)
	if err != nil {
		return File{}, err
	}
	attrs, err := b.Attributes(ctx, l.Prefix+rel)
	if err != nil {
		return File{}, Err(rel, err)
	}
	return File{Path: rel, Size: attrs.Size, Updated: attrs.ModTime.UTC(), Checksum: storedChecksum(attrs.As)}, nil
}

// Open returns a reader of rel under l from offset, at most length bytes
// (length < 0: to the end), and the file's attributes.
func (o *Opener) Open(ctx context.Context, l Location, rel string, offset, length int64) (*blob.Reader, File, error) {
	f, err := o.Stat(ctx, l, rel)
	if err != nil {
		return nil, File{}, err
	}
	if offset > f.Size {
		return nil, File{}, errdefs.Invalid("offset", "%d is past the end of %s (%d bytes)", offset, rel, f.Size)
	}
	if offset == f.Size {
		// Where a reader that read it all asks for more: GCS refuses a
		// range that starts at the end (416), so ask for none of it.
		length = 0
	}
	b, err := o.Bucket(ctx, l)
	if err != nil {
		return nil, File{}, err
	}
	r, err := b.NewRangeReader(ctx, l.Prefix+rel, offset, length, nil)
	if err != nil {
		return nil, File{}, Err(rel, err)
	}
	return r, f, nil
}

// Writer opens an object under l for writing; Close commits it.
func (o *Opener) Writer(ctx context.Context, l Location, rel, contentType string) (*blob.Writer, error) {
	b, err := o.Bucket(ctx, l)
	if err != nil {
		return nil, err
	}
	w, err := b.NewWriter(ctx, l.Prefix+rel, &blob.WriterOptions{ContentType: contentType})
	if err != nil {
		return nil, Err(rel, err)
	}
	return w, nil
}

// Err maps a blob error to Falcon's error kinds, naming what was asked for.
func Err(what string, err error) error {
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return errdefs.NotFoundf("%s: no such file", what)
	case gcerrors.PermissionDenied:
		return errdefs.PermissionDenied("%s: the storage refused access: %v", what, err)
	case gcerrors.Canceled:
		return fmt.Errorf("%s: %w", what, context.Canceled)
	case gcerrors.DeadlineExceeded:
		return fmt.Errorf("%s: %w", what, context.DeadlineExceeded)
	case gcerrors.InvalidArgument:
		return errdefs.Invalid("path", "%s: %v", what, err)
	default:
		return errdefs.Unavailable("%s: storage: %v", what, err)
	}
}
