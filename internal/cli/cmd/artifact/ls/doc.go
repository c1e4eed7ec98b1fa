// Package ls implements `falcon artifact ls`: every file of an
// experiment's artifact, from the server's index of them.
package ls
