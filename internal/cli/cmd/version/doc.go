// Package version implements `falcon version`: which build of the CLI is
// running, the first thing to ask for in a bug report.
package version
