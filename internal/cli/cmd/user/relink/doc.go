// Package relink implements `falcon user relink`: move the user registered
// with an email to the new Cloudflare identity (sub) they were given.
package relink
