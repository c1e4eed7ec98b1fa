// Package config groups the commands that edit the CLI's own configuration
// file (`falcon config ...`, see package contexts): named servers, and which
// one commands talk to by default. None of them talks to a server.
package config
