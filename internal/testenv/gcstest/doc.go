// Package gcstest runs fsouza/fake-gcs-server on a loopback port for tests:
// the real Cloud Storage Go client (behind gocloud.dev's gcsblob) speaks the
// real JSON API to it over HTTP, so what Falcon does with a gs:// bucket is
// tested without a hand-written fake of Falcon's own storage layer.
package gcstest
