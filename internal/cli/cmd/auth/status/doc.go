// Package status implements `falcon auth status`: which token the CLI
// would send to the server, whom it names and until when. It reads the
// cache (or FALCON_TOKEN) only and never calls the server, so it answers
// offline; it exits 5 when there is no usable login.
package status
