// Package credentials is the CLI's token cache, ~/.falcon/credentials: one
// Cloudflare Access token per server, written by `falcon auth login` and
// attached to every request to that server. The file holds secrets, so it
// is created 0600 in a 0700 directory and replaced atomically.
//
// Before a token is sent its expiry is checked here (from the token's exp,
// read without verification: only the server can verify), so an expired
// login fails at once with what to do, instead of reaching the server.
package credentials

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/falconhq/falcon/internal/auth"
)

// Environment variables the CLI reads.
const (
	// TokenEnv, when set, is the token for every server (CI, agents); it
	// overrides the cache.
	TokenEnv = "FALCON_TOKEN"
	// ConfigDirEnv overrides the directory of the cache (default ~/.falcon).
	ConfigDirEnv = "FALCON_CONFIG_DIR"
)

// FileName is the cache's name inside the config directory.
const FileName = "credentials"

// Entry is one server's login.
type Entry struct {
	Token  string    `json:"token"`
	Expiry time.Time `json:"expiry"`
	// User is who the token names, as the server reported it at login.
	User string `json:"user,omitempty"`
}

type file struct {
	Servers map[string]Entry `json:"servers"`
}

// Store is the cache file.
type Store struct {
	Path string
}

// Default returns the cache in $FALCON_CONFIG_DIR, or else in $HOME/.falcon.
func Default(getenv func(string) string) (*Store, error) {
	dir := getenv(ConfigDirEnv)
	if dir == "" {
		home := getenv("HOME")
		if home == "" {
			return nil, status.Errorf(codes.FailedPrecondition, "cannot place the credentials file: set HOME or %s", ConfigDirEnv)
		}
		dir = filepath.Join(home, ".falcon")
	}
	return &Store{Path: filepath.Join(dir, FileName)}, nil
}

func (s *Store) read() (file, error) {
	f := file{Servers: map[string]Entry{}}
	b, err := os.ReadFile(s.Path)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return f, fmt.Errorf("read credentials: %w", err)
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return f, fmt.Errorf("credentials file %s is damaged (%v); delete it and run `falcon auth login`", s.Path, err)
	}
	if f.Servers == nil {
		f.Servers = map[string]Entry{}
	}
	return f, nil
}

// write replaces the file: a new file, mode 0600, renamed over the old one,
// so a crash never leaves half a file and the token is never readable by
// others, not even for a moment.
func (s *Store) write(f file) error {
	dir := filepath.Dir(s.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, FileName+".*.tmp") // CreateTemp makes it 0600
	if err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	defer os.Remove(tmp.Name()) // a no-op once renamed
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write credentials: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write credentials: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("write credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	if err := os.Rename(tmp.Name(), s.Path); err != nil {
		return fmt.Errorf("write credentials: %w", err)
	}
	return nil
}

// Get returns server's login, if any.
func (s *Store) Get(server string) (Entry, bool, error) {
	f, err := s.read()
	if err != nil {
		return Entry{}, false, err
	}
	e, ok := f.Servers[server]
	return e, ok, nil
}

// Put records server's login, replacing any earlier one.
func (s *Store) Put(server string, e Entry) error {
	f, err := s.read()
	if err != nil {
		return err
	}
	f.Servers[server] = e
	return s.write(f)
}

// Delete forgets server's login; it reports whether there was one.
func (s *Store) Delete(server string) (bool, error) {
	f, err := s.read()
	if err != nil {
		return false, err
	}
	if _, ok := f.Servers[server]; !ok {
		return false, nil
	}
	delete(f.Servers, server)
	return true, s.write(f)
}

// Login is the token the CLI would send to a server, and where it came from.
type Login struct {
	Entry
	Source string // TokenEnv, or the cache file's path
}

// Expired reports whether the token has expired at now (a token with no
// readable expiry never does here; the server decides).
func (l Login) Expired(now time.Time) bool {
	return !l.Expiry.IsZero() && !now.Before(l.Expiry)
}

// Resolver finds the token for one server.
type Resolver struct {
	Server string // normalized (client.NormalizeServer)
	// Store is the cache; nil when it cannot be placed (no HOME), in which
	// case only TokenEnv can supply a token.
	Store  *Store
	Getenv func(string) string
	Now    func() time.Time
}

// Lookup returns the token for the server: TokenEnv if set, else the cached
// login. ok is false when there is neither.
func (r Resolver) Lookup() (l Login, ok bool, err error) {
	if tok := r.Getenv(TokenEnv); tok != "" {
		l := Login{Entry: Entry{Token: tok}, Source: TokenEnv}
		if _, c, err := auth.Peek(tok); err == nil {
			l.Expiry, l.User = c.Expiry, displayName(c)
		}
		return l, true, nil
	}
	if r.Store == nil {
		return Login{}, false, nil
	}
	e, ok, err := r.Store.Get(r.Server)
	if err != nil || !ok {
		return Login{}, false, err
	}
	return Login{Entry: e, Source: r.Store.Path}, true, nil
}

// Token is a client.TokenFunc: the token to send, "" when there is none
// (a server without authentication, such as `falcon dev`, needs none),
// or an Unauthenticated error when it has expired.
func (r Resolver) Token(context.Context) (string, error) {
	l, ok, err := r.Lookup()
	if err != nil || !ok {
		return "", err
	}
	if l.Expired(r.Now()) {
		return "", ExpiredError(r.Server, l)
	}
	return l.Token, nil
}

// ExpiredError says that l has expired and what to do about it.
func ExpiredError(server string, l Login) error {
	if l.Source == TokenEnv {
		return status.Errorf(codes.Unauthenticated, "the token in %s expired at %s; set a fresh one", TokenEnv, l.Expiry.Local().Format(time.RFC3339))
	}
	return status.Errorf(codes.Unauthenticated, "your login to %s expired at %s; run `falcon auth login --server %s`",
		server, l.Expiry.Local().Format(time.RFC3339), server)
}

// NotLoggedInError says there is no login for server.
func NotLoggedInError(server string) error {
	return status.Errorf(codes.Unauthenticated, "not logged in to %s; run `falcon auth login --server %s`", server, server)
}

func displayName(c auth.Claims) string {
	if c.Email != "" {
		return c.Email
	}
	return c.CommonName
}

// UserOf names who a token is for, read without verification.
func UserOf(token string) (user string, expiry time.Time, err error) {
	_, c, err := auth.Peek(token)
	if err != nil {
		return "", time.Time{}, err
	}
	return displayName(c), c.Expiry, nil
}
