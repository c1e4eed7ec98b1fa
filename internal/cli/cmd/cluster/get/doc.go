// Package get implements `falcon cluster get`: one cluster by name or ID.
package get
