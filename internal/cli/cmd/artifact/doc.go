// Package artifact groups the commands that get an experiment's files out
// (`falcon artifact ls|cat|get`). They always go through the API server,
// which holds the storage credentials: the CLI never opens a bucket.
package artifact
