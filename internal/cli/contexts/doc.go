// Package contexts is the CLI's configuration file, ~/.falcon/config.yaml:
// named contexts, each naming a Falcon server, and the one in use, as
// kubectl's kubeconfig contexts do. It holds no secrets (tokens stay in
// the credentials file, per server), so people may edit or share it.
//
// Which server a command talks to is decided once, by Resolve, in this
// order: --server, --context, $FALCON_SERVER, $FALCON_CONTEXT, the file's
// current-context, then `falcon dev`'s address. A context that does not
// exist, or names no server, is an error that says so and what to run;
// it never falls back silently to another server.
package contexts
