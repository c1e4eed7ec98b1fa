// Package changefeed wakes whoever waits on Falcon's state when it changes.
//
// Controllers are level-triggered: they re-read everything they own on every
// cycle, so they never need to know *what* changed, only *that* something did.
// A Feed therefore coalesces: a slow subscriber gets one pending wake-up, not
// a queue of events, and a publisher never blocks. The periodic poll remains
// as the safety net; the feed only makes the common path fast.
package changefeed
