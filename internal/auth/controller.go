package auth

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"os"
	"strings"

	"google.golang.org/grpc/credentials"
)

// ControllerTokenKey is the gRPC metadata key that carries the controllers'
// shared secret. The HTTP gateway never forwards it, so it only arrives on
// direct gRPC calls.
const ControllerTokenKey = "x-falcon-controller-token"

// minControllerSecret is the shortest secret accepted: 128 bits of
// base64 or hex cannot be guessed, and a typo'd or empty file is refused.
const minControllerSecret = 22

// Controller is the principal of every call made with the controller
// secret. Controllers act for the system, never for a person, so they own
// nothing and are not registered as users.
var Controller = Principal{UserID: "falcon:controller", Name: "controller", Kind: KindController}

// ControllerSecret is the secret shared by the API server and its
// controllers. It is compared in constant time, through a hash so that not
// even its length leaks.
type ControllerSecret struct {
	sum [sha256.Size]byte
}

// Derive returns a key for purpose made from the secret, so that every
// replica of the server holding the same secret makes the same key without
// another secret to distribute, and the key reveals nothing of the secret.
func (c *ControllerSecret) Derive(purpose string) []byte {
	m := hmac.New(sha256.New, c.sum[:])
	m.Write([]byte(purpose))
	return m.Sum(nil)
}

// NewControllerSecret checks secret and returns it ready for comparison.
func NewControllerSecret(secret string) (*ControllerSecret, error) {
	secret = strings.TrimSpace(secret)
	if len(secret) < minControllerSecret {
		return nil, fmt.Errorf("the controller token is %d characters; at least %d are required (e.g. `openssl rand -base64 32`)", len(secret), minControllerSecret)
	}
	return &ControllerSecret{sum: sha256.Sum256([]byte(secret))}, nil
}

// Match reports whether token is the secret.
func (s *ControllerSecret) Match(token string) bool {
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	return subtle.ConstantTimeCompare(got[:], s.sum[:]) == 1
}

// GenerateControllerSecret returns a fresh random secret, for processes
// that run the server and the controllers together (`falcon dev`).
func GenerateControllerSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ReadControllerSecret reads a secret from a file (a mounted Kubernetes
// secret, typically); surrounding whitespace is ignored.
func ReadControllerSecret(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("read controller token: %w", err)
	}
	s := strings.TrimSpace(string(b))
	if _, err := NewControllerSecret(s); err != nil {
		return "", fmt.Errorf("controller token file %s: %w", path, err)
	}
	return s, nil
}

// ControllerCredentials attaches the secret to every call of a gRPC
// connection (grpc.WithPerRPCCredentials). Controllers reach the API server
// inside the cluster network, so it is sent without TLS as the connection
// itself is.
func ControllerCredentials(secret string) credentials.PerRPCCredentials {
	return controllerCreds(strings.TrimSpace(secret))
}

type controllerCreds string

func (c controllerCreds) GetRequestMetadata(context.Context, ...string) (map[string]string, error) {
	return map[string]string{ControllerTokenKey: string(c)}, nil
}

func (controllerCreds) RequireTransportSecurity() bool { return false }
