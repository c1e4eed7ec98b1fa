// Package client talks to a Falcon API server over its HTTP gateway.
//
// The CLI uses HTTP rather than gRPC so that the same URL works from a
// laptop, through proxies and port-forwards, and with curl when debugging;
// `falcon dev` serves it on http://127.0.0.1:7070. Bodies are the generated
// falconv1 messages encoded with protojson, exactly as grpc-gateway expects.
//
// Every error a method returns is a gRPC status error, whatever went wrong:
// the server's own status (decoded from the gateway's error body), a server
// that cannot be reached (Unavailable, naming the URL), or a request that
// timed out (DeadlineExceeded). Callers branch on status.Code(err) alone,
// and errdefs.ExitCode turns that code into the CLI's exit code.
//
// The streams (WatchExp, GetExpLogs) read grpc-gateway's newline-delimited
// chunks through one reader (stream.go): a connection that breaks, even in
// the middle of a chunk, is Unavailable, which the CLI's followers answer
// by resuming where they were; a whole chunk that does not decode is
// Internal.
package client
