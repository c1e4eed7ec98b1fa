// Package exitcode says what a process's exit code means to the person
// reading a failed job's Message: a shell reports a command that a signal
// killed as 128 plus the signal's number, so 137 is SIGKILL (often the
// kernel's out-of-memory killer) and 143 is SIGTERM (a stop), which a bare
// "exit code 143" leaves for the reader to decode.
package exitcode
