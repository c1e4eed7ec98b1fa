// Package output is the one printer every CLI command uses, so that -o/--output
// means the same thing everywhere and scripts can rely on it.
//
// json is the API's own wire form (protojson with proto field names, every
// field present, stable indentation): what `jq` sees is what the server
// sent. yaml is that JSON converted to YAML. table is for people: each
// command passes a TableFunc, and the views of Falcon's resources that
// several commands share (an experiment's detail, the experiment, job and
// cluster lists) live here so they look the same wherever they appear.
//
// Hints for people (an empty list, a next page) go to a separate Notes
// writer, stderr in the CLI, so they never end up in a pipe.
package output
