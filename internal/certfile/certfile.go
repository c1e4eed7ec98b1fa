package certfile

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Flags name the flags a Reloader's files came from, for errors.
type Flags struct {
	Cert, Key string
}

// DefaultFlags are `falcon server`'s.
var DefaultFlags = Flags{Cert: "--tls-cert-file", Key: "--tls-key-file"}

// CheckInterval is how often, at most, a Reloader looks at its files: a
// handshake costs two stat calls at most once per interval, never a read.
const CheckInterval = time.Second

// Reloader serves a certificate and key read from files and re-reads them
// when either file's modification time or size changes. A reload that
// fails (a file half written, a key that does not match yet) keeps the
// certificate in use and is logged; the next change is tried again.
type Reloader struct {
	certFile, keyFile string
	flags             Flags
	log               *slog.Logger
	now               func() time.Time

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     [2]fileStamp
	checkedAt time.Time
}

type fileStamp struct {
	mod  time.Time
	size int64
}

// Option configures a Reloader.
type Option func(*Reloader)

// WithLogger logs reloads and failed reloads.
func WithLogger(l *slog.Logger) Option { return func(r *Reloader) { r.log = l } }

// WithClock replaces time.Now, for tests that step past CheckInterval.
func WithClock(now func() time.Time) Option { return func(r *Reloader) { r.now = now } }

// WithFlags names the flags in errors.
func WithFlags(f Flags) Option { return func(r *Reloader) { r.flags = f } }

// NewReloader reads certFile and keyFile once and fails, naming the flag,
// if either is missing or unreadable, holds no PEM, or the two do not
// belong together.
func NewReloader(certFile, keyFile string, opts ...Option) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, flags: DefaultFlags, now: time.Now}
	for _, o := range opts {
		o(r)
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	switch {
	case certFile == "" && keyFile == "":
		return nil, errdefs.Invalid(r.flags.Cert, "is required")
	case certFile == "":
		return nil, errdefs.Invalid(r.flags.Cert, "is required with %s", r.flags.Key)
	case keyFile == "":
		return nil, errdefs.Invalid(r.flags.Key, "is required with %s", r.flags.Cert)
	}
	cert, stamp, err := r.load()
	if err != nil {
		return nil, err
	}
	r.cert, r.stamp, r.checkedAt = cert, stamp, r.now()
	return r, nil
}

// load reads both files and parses the pair.
func (r *Reloader) load() (*tls.Certificate, [2]fileStamp, error) {
	var stamp [2]fileStamp
	certPEM, s, err := readFile(r.flags.Cert, r.certFile)
	if err != nil {
		return nil, stamp, err
	}
	stamp[0] = s
	keyPEM, s, err := readFile(r.flags.Key, r.keyFile)
	if err != nil {
		return nil, stamp, err
	}
	stamp[1] = s
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, stamp, errdefs.Invalid(r.flags.Cert, "%s and %s %s do not form a certificate and its key: %v", r.certFile, r.flags.Key, r.keyFile, err)
	}
	if cert.Leaf != nil && r.now().After(cert.Leaf.NotAfter) {
		r.log.Warn("TLS certificate has expired", "file", r.certFile, "not_after", cert.Leaf.NotAfter)
	}
	return &cert, stamp, nil
}

func readFile(flag, name string) ([]byte, fileStamp, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, fileStamp{}, errdefs.Invalid(flag, "cannot read %s: %v", name, unwrapPath(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fileStamp{}, errdefs.Invalid(flag, "cannot read %s: %v", name, unwrapPath(err))
	}
	if fi.IsDir() {
		return nil, fileStamp{}, errdefs.Invalid(flag, "%s is a directory; want a PEM file", name)
	}
	b, err := os.ReadFile(name)
	if err != nil {
		return nil, fileStamp{}, errdefs.Invalid(flag, "cannot read %s: %v", name, unwrapPath(err))
	}
	return b, fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// unwrapPath drops the path an *os.PathError repeats.
func unwrapPath(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func stat(name string) (fileStamp, error) {
	fi, err := os.Stat(name)
	if err != nil {
		return fileStamp{}, err
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size()}, nil
}

// Certificate returns the certificate in use, first re-reading the files
// if they changed since the last look (at most once per CheckInterval).
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if now.Sub(r.checkedAt) < CheckInterval {
		return r.cert
	}
	r.checkedAt = now
	c, errc := stat(r.certFile)
	k, errk := stat(r.keyFile)
	if errc != nil || errk != nil || (c == r.stamp[0] && k == r.stamp[1]) {
		// A file gone for a moment (a Secret volume mid-swap) keeps the
		// certificate in use; the next look sees the new files.
		return r.cert
	}
	cert, stamp, err := r.load()
	if err != nil {
		// Remember the stamps anyway, or every handshake would re-read a
		// pair that stays broken; a later write changes them again.
		r.stamp = [2]fileStamp{c, k}
		r.log.Error("TLS certificate not reloaded; serving the previous one", "err", err)
		return r.cert
	}
	r.cert, r.stamp = cert, stamp
	r.log.Info("TLS certificate reloaded", "file", r.certFile, "not_after", notAfter(cert))
	return r.cert
}

func notAfter(c *tls.Certificate) time.Time {
	if c.Leaf != nil {
		return c.Leaf.NotAfter
	}
	return time.Time{}
}

// ServerConfig is a TLS configuration that asks r for the certificate on
// every handshake; nextProtos are the ALPN protocols served ("h2" for
// gRPC, which its clients require).
func (r *Reloader) ServerConfig(nextProtos ...string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: nextProtos,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return r.Certificate(), nil
		},
	}
}

// ClientConfig is a client's TLS configuration: the CA bundle in caFile
// (the system's roots when empty) and serverName to check the server's
// certificate against (the dialled host when empty). caFlag names the
// flag that gave caFile.
func ClientConfig(caFlag, caFile, serverName string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName}
	if caFile == "" {
		return cfg, nil
	}
	b, _, err := readFile(caFlag, caFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errdefs.Invalid(caFlag, "%s holds no PEM certificate", caFile)
	}
	cfg.RootCAs = pool
	return cfg, nil
}

// String is for logs.
func (r *Reloader) String() string { return fmt.Sprintf("%s+%s", r.certFile, r.keyFile) }
