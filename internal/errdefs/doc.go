// Package errdefs holds Falcon's typed domain errors and is the one place that
// maps them to gRPC codes (and through grpc-gateway to HTTP statuses) and to
// the CLI's exit codes.
//
// Packages below the API (validation, store, lifecycle) return these errors;
// the API server converts them exactly once with ToStatus, and the CLI turns
// the code it receives back into an exit code with ExitCode. Nothing else in
// Falcon chooses a code.
package errdefs
