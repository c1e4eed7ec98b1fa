// Package watch turns the API server's WatchChanges stream into wake-ups for
// a control loop. Loops stay level-triggered and keep their periodic poll;
// the stream only shortens the time from a change to the next cycle from a
// poll interval to a round trip. A broken stream is re-opened with backoff
// and never stops the loop.
package watch
