// Package wait implements `falcon exp wait`: block until an experiment ends
// and say how through the exit code, replacing the polling loops with
// deadlines and retries that users' scripts used to carry.
//
// A blip in reaching the server (Unavailable, a request timing out) is
// retried until the overall timeout, because a wait that dies on a restart
// of the API server fails hours of work for nothing. Time comes from an
// injected clock and sleep, so tests run a 30-minute wait instantly.
package wait
