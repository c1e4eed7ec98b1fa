// Package watch turns the API server's WatchChanges stream into what a
// control loop needs. Changes gives bare wake-ups (coalesced), for loops
// that re-read everything they own each cycle. Follower also keeps the set
// of experiments changed since the caller last asked, resuming the stream
// from the last change seen, and says resync whenever it cannot vouch that
// the set is complete, so a loop can read only what changed. It skips
// derived changes (mirrors of jobs already reported: the expController's,
// and those a job write carries along), which are news to neither
// controller; for a caller that names itself (Skip), the echoes of its own
// writes; and for one that only derives experiments from jobs
// (SkipSettled), the job changes whose write already settled their
// experiment. A caller that acts on a job's write within Pending only a
// while later (DeferMirrors) gets those changes' experiments together, once
// that while has passed. A change written before the stream said hello is on no
// stream, so the hello itself asks for a resync; a loop waits for it
// (WaitConnected) before its first cycle to read once, not twice. Loops
// keep their periodic poll either way; a broken stream is re-opened with
// backoff and never stops the loop. Loop runs a controller's cycles on
// those wake-ups and its interval, and drains on Shutdown.
package watch
