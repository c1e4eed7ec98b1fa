// Package getcontexts implements `falcon config get-contexts`: every named
// server, and which is current.
package getcontexts
