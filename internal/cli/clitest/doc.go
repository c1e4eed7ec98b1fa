// Package clitest runs a real Falcon API surface on loopback for CLI tests:
// a gRPC server with a scriptable implementation of every service, behind a
// grpc-gateway mux configured like the real server's, served over HTTP.
//
// Commands under test therefore go through the real client, real HTTP,
// real protojson and the real gateway (including the streaming of logs),
// and only the behaviour behind the services is canned. The real server
// implementation belongs to other packages; these tests pin the CLI to the
// API contract instead.
package clitest
