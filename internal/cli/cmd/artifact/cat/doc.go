// Package cat implements `falcon artifact cat`: one file's bytes to stdout,
// streamed, whatever its size.
package cat
