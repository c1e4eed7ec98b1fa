// Package apiserver is FalconAPIServer: the gRPC services for experiments,
// jobs, artifacts, clusters and users, and the HTTP/JSON gateway in front of
// them. It is the only component that touches the store; controllers and the
// CLI go through it, so validation, authorization and auditing have one home.
//
// One request's path: the interceptor authenticates the caller (auth: the
// controller secret, or the configured authenticator; a call refused there
// is only counted, per source and reason per minute, in the audit log:
// refusals.go), checks the method is open to that kind of caller
// (access.go: cluster writes, users and the audit log are the admins'),
// and registers the user (users.go: a recreated identity is refused with
// the relink that fixes it); the
// handler validates input (validation), checks ownership where it changes an
// experiment, calls the store, converts the result to the API type, and
// publishes a wake-up on the change feed so controllers react at once.
// Mutations are then written to the audit log. Errors leave through one
// interceptor that maps domain errors to gRPC codes (errdefs.ToStatus); the
// gateway turns those into HTTP statuses.
//
// The controller-only methods (status updates, AbortJob, WatchChanges) are
// kept from users twice: api/falcon/v1/gateway.yaml gives them no HTTP
// route, and the access rules refuse them over gRPC to anyone but a
// controller; the gateway never forwards the controller secret. Requests
// are capped at MaxRequestBytes on both paths, far above what validation
// allows, so oversized input is refused by field name rather than by the
// transport. /auth/login serves `falcon auth login`.
package apiserver
