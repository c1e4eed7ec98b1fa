// Package artifactindex keeps the database's index of each artifact's files
// in step with the bucket that holds them.
//
// The bucket is the truth: jobs write there directly (GCS FUSE on GKE, the
// local disk on falcon dev), so no Falcon process sees a file being
// written. Refresh walks the artifact's prefix once, compares it with the
// index and writes only the difference; listings, `exp get` and queries
// across experiments then read the index, never the bucket. A refresh made
// after the experiment ended marks the index complete, and a complete index
// is never walked again.
//
// Where stores keep no checksum (file://, composite GCS objects), Refresh
// reads the file to compute one, once per new or changed file.
package artifactindex
