// Package ids makes Falcon's public identifiers: a kind prefix and ten
// characters of [a-z0-9] (exp-q7odgo8q9x). Users type and paste these, so they
// are short, lower-case and unambiguous in URLs, Kubernetes names and paths.
package ids
