// Package cli is the `falcon` command: it builds the command tree, runs it,
// and turns the outcome into the exit code scripts and agents branch on.
//
// Every command lives in its own package under cmd/<noun>/<verb>; this
// package only wires them to a Factory (streams, client, output format) and
// owns the process-level conventions:
//
//   - Exit codes come from errdefs.ExitCode applied to the error's gRPC code
//     (the client turns every failure into one), except for errors that carry
//     their own (factory.ExitError: `exp wait` outcomes). Usage errors caught
//     by cobra before a command runs (unknown flags or commands, wrong
//     argument counts, a bad -o) exit errdefs.ExitInvalid.
//   - Errors are printed to stderr as "Error: <message>". When the output
//     format is json, stderr's last line is additionally the error as one
//     JSON object, {"error":{"code":"NotFound","message":"...","exit_code":3}},
//     so an agent can parse it; stdout stays empty so a pipe into jq never
//     mistakes an error for a result.
//   - -o/--output defaults to table on a terminal and json otherwise;
//     --server defaults to $FALCON_SERVER, then to `falcon dev`'s address.
package cli
