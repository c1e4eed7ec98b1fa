// Package refusallog counts the calls the API server refuses before it
// knows who called (no credential, or one it could not verify), so the
// audit log can record them without a row per call: one entry per source
// and reason per minute, with a count. Anyone can send such calls, as
// fast as they like and from addresses of their choosing, so the package
// holds at most a fixed number of distinct (source, reason) pairs per
// minute and counts the calls past it in one "other" entry. It does no
// I/O and reads no clock: callers pass the time and write what Take
// returns.
package refusallog
