// Package user groups the user commands (`falcon user ...`), an admin's:
// who is registered, and moving a user whose Cloudflare identity was
// recreated back to their account.
package user
