// Package login implements `falcon auth login`: log in through Cloudflare
// Access in the browser and cache the resulting token for the server.
//
// The CLI listens on a one-shot loopback port and sends the browser to the
// server's /auth/login, which sits behind Cloudflare Access: the browser
// logs in there first. The server then shows a page with the short code
// the CLI printed, and only when the user confirms it (the code matches
// their terminal) hands the verified Access token back to the loopback
// port together with the random state this login chose. The confirmation
// keeps another user of a shared machine from collecting the token with a
// link naming their own listener. A callback whose state differs is
// refused, so no other page can plant a token. The token is then checked by asking the server who it names, and
// cached in ~/.falcon/credentials (mode 0600).
package login
