// Package auth establishes who is calling the API server and what it may
// do: the Principal that every handler reads from the request context and
// that experiments record as their creator.
//
// Callers are of three kinds. People and service tokens (CI, agents)
// present a Cloudflare Access token, verified by CloudflareAccess against
// the team's published keys; `falcon dev` uses Local instead, which
// attributes every call to the user running the process: it listens on
// loopback only, so the machine's user is the only possible caller.
// Falcon's controllers present a shared secret (ControllerSecret), the only
// credential for the internal methods.
//
// Authorization lives here too, as data the API server consults: Admins,
// the people (by email, or by an identity-provider group the token
// carries) who may act on anyone's experiments, write the cluster
// registry and read the audit log.
package auth
