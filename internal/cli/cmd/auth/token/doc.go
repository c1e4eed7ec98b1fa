// Package token implements `falcon auth token`: print the token the CLI
// would send, for scripts that call the HTTP API directly
// (curl -H "Authorization: Bearer $(falcon auth token)"). An expired or
// missing login fails (exit 5) instead of printing a dead token.
package token
