// Package validate implements `falcon exp validate`: check a manifest
// without creating anything, locally for structure and on the server for
// every semantic rule, so CI and agents can vet a manifest before it holds
// a slice.
package validate
