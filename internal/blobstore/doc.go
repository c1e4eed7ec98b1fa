// Package blobstore is where Falcon keeps what jobs write: one layer over
// gocloud.dev/blob for gs:// buckets (the real Cloud Storage client, with
// Application Default Credentials or Workload Identity) and file://
// directories (falcon dev).
//
// A location is a URI whose path is a key prefix: gs://bucket/experiments/
// <exp>/artifacts/<art>/ or file:///home/me/.falcon/dev/experiments/....
// An Opener turns it into a bucket and that prefix, keeping one bucket per
// gs:// bucket name (clients are expensive) and rooting file:// buckets at
// "/" so that any absolute directory is reachable by key.
//
// Paths inside an artifact come from users (CLI arguments, URLs), so every
// one goes through Rel, which refuses anything that, once decoded, would
// leave the artifact. Keys are always built as prefix + Rel(path).
package blobstore
