// Package get implements `falcon exp get`: one experiment with its jobs and
// artifact, the call scripts make most often (`-o json | jq .status`).
package get
