// Package apiserver is FalconAPIServer: the gRPC services for experiments,
// jobs, artifacts, clusters and users, and the HTTP/JSON gateway in front of
// them. It is the only component that touches the store; controllers and the
// CLI go through it, so validation, authorization and auditing have one home.
//
// One request's path: the interceptor authenticates the caller (auth) and
// registers the user; the handler validates input (validation), calls the
// store, converts the result to the API type, and publishes a wake-up on the
// change feed so controllers react at once. Errors leave through one
// interceptor that maps domain errors to gRPC codes (errdefs.ToStatus); the
// gateway turns those into HTTP statuses.
//
// Which methods are public is decided by api/falcon/v1/gateway.yaml: the
// controller-only methods (status updates, AbortJob, WatchChanges) have no
// HTTP route at all.
package apiserver
