// Package stack assembles Falcon's parts into the processes it ships:
// `falcon server` (API server over MySQL or SQLite), `falcon controller`
// (expController and resource manager, talking to a server over gRPC),
// `falcon migrate`, and `falcon dev`, which runs all of them in one process
// on SQLite with the local cluster backend.
//
// Even inside `falcon dev` the controllers reach the API server through its
// gRPC port on loopback, exactly as they do in production, so the dev
// environment exercises the same paths users depend on.
//
// `falcon controller` may run as several replicas: they elect one leader
// (internal/leader), and only the leader runs the loops, each term built
// afresh; `falcon server` replicas share nothing but the database.
package stack
