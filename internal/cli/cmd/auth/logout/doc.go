// Package logout implements `falcon auth logout`: forget the cached token
// for the server. Cloudflare Access sessions themselves end in the browser
// or at their expiry; this only removes the CLI's copy.
package logout
