// Package certtest issues real X.509 certificates for tests: a CA and
// server certificates it signs, written as PEM files the way cert-manager
// leaves them in a Secret volume (ca.crt, tls.crt, tls.key).
package certtest
