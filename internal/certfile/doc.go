// Package certfile loads TLS material from files: a server's certificate
// and key, reloaded when the files change, and a CA bundle for clients.
//
// Files rather than flags holding PEM, because that is how cert-manager and
// Kubernetes Secrets deliver them: a Secret volume swaps its files under a
// symlink when the certificate is renewed, so a server that re-reads them
// needs no restart. Errors name the flag that gave the file, so a user sees
// which of their settings is wrong.
package certfile
