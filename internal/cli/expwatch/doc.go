// Package expwatch follows an experiment's event stream (WatchExp) for the
// commands built on it: `exp events -f`, `exp get -w` and `exp wait`.
//
// A stream that breaks — the API server restarts, a proxy cuts a long
// connection — is opened again after the last event received, so the
// caller sees every event once, in order, and knows the experiment ended
// only from the event the server marks terminal, never from a connection
// that merely closed. Reconnection waits through an injected sleep, so
// tests need not.
package expwatch
