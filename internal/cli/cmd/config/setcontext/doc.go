// Package setcontext implements `falcon config set-context`: add a named
// server or change the server of one.
package setcontext
