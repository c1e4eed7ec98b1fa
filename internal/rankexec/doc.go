// Package rankexec is the contract between the API server and the backends
// that run a command beside one rank of a job: what to run and with which
// streams (Session), and how it ended (ExitError). The API server opens
// sessions for `falcon exp exec` and `exp cp`; falcon dev's local backend
// (provider/local) and the Kubernetes exec (podexec) carry them out. It sits
// below both so that neither imports the other.
package rankexec
