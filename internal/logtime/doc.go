// Package logtime records when a log file grew, in an index beside it, for
// logs whose writer stamps nothing (falcon dev's ranks write straight into
// their files, as a container writes to its stdout), and reads it back, so
// that `exp logs --timestamps` and `--since` work on falcon dev as they do
// on a cluster whose kubelet stamps each line.
//
// The index of LOG is LOG.ts: records of 16 bytes, the file's size and the
// time it was seen at that size (Unix nanoseconds), both little-endian, in
// the order they were seen. A line's time is that of the first record whose
// size reaches the line's end: when the file was first seen holding the
// whole line. The Recorder notes a size on every change the kernel reports
// (inotify; where it will not watch, it looks every markGap instead), at
// most one record per markGap (50 ms), so a time is late by at most that
// gap plus the recorder's wake-up, and a writer that never pauses costs it
// twenty records a second.
package logtime
