// Package auth groups the `falcon auth` commands: log in to a server
// through Cloudflare Access, see and print the cached login, and log out.
package auth
