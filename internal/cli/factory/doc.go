// Package factory is what every command is built from: the Factory hands out
// the streams, the API client and the output format, and this package also
// holds the few rules all commands share (how a destructive command asks
// for confirmation, how a status flag is read, how a command asks for an
// exit code that no gRPC code maps to).
//
// It sits apart from package cli so that the command packages can use it
// while cli imports them to build the command tree.
package factory
