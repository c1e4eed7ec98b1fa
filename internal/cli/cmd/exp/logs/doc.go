// Package logs implements `falcon exp logs`: print, or follow, the output
// of an experiment's pods, labelled by role and rank when there are several
// so interleaved hosts stay readable.
package logs
