// Package auth establishes who is calling the API server: the Principal that
// every handler reads from the request context and that experiments record as
// their creator.
//
// Authenticators are pluggable. `falcon dev` uses Local, which attributes every
// call to the user running the process: it listens on loopback only, so the
// machine's user is the only possible caller. Token verification for shared
// deployments plugs in behind the same interface.
package auth
