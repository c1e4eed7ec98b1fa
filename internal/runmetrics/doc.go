// Package runmetrics extracts the metrics an experiment's job reports and
// summarizes them. It does no I/O of its own: callers hand it readers or
// lines and store what it returns, so the same code runs while a job runs,
// when it ends, and in tests.
//
// A job reports a metric in two ways:
//
//   - metrics.jsonl in $FALCON_ARTIFACT_DIR, one JSON object a line, e.g.
//     {"step": 10, "step_time": 0.41, "tflops": 312.5}. "step" is the step,
//     a non-negative integer (10.0 is accepted as 10); without it the step is
//     the line's ordinal among the valid lines so far, from 0. Every other
//     field whose value is a number and whose key is a valid metric name is
//     a point; strings, booleans, null, arrays and objects are ignored, and
//     so are further names once MaxFileNames distinct names have been seen.
//     A line is skipped (and counted) if it is not a JSON object, its
//     "step" is not such an integer, or a number in it overflows float64;
//     JSON has no NaN or Infinity, so a line holding them is not JSON.
//     Blank lines are neither points nor skipped.
//   - Rank 0's log, matched by the patterns of the manifest's `metrics:`
//     (Spec, validated by Compile). Each line is tried against every
//     pattern; the first match of a pattern gives one point from its
//     `value` group, with the step from its `step` group if it has one and
//     it took part, else the number of points of that metric from the log
//     so far. A line that matches but whose value is not a finite number
//     (NaN and Inf included) or whose step is not a non-negative integer is
//     skipped and counted once; lines that match nothing are not counted.
//
// Bad lines never fail the job or the extraction: they end up in
// Cursor.Skipped, which `falcon exp metrics` shows as skipped_lines.
//
// Extraction is incremental. An Extractor keeps no points, only a Cursor
// (bytes consumed of each source, the counters that number steps, skipped
// counts) and buffers of bounded size. ReadFile and ReadLog consume complete
// lines only and hand points to a callback in batches; persist the batch
// together with Extractor.Cursor() (one transaction), and a later
// extraction, perhaps in another process, resumes with NewExtractor(p, c)
// and a reader opened at c.FileOffset / c.LogOffset, without repeating or
// renumbering a point. A last line without its newline is left for the next
// call until the job has ended (final). Sources without byte offsets (the
// pod log API, Cloud Logging) feed lines with FeedLog and keep their own
// position beside the Cursor.
//
// Summarize is a pure function of points, so a summary computed from the
// rows in the store equals one computed during extraction. A name reported
// by both sources keeps its file points and is listed in Report.Conflicts;
// Resolve applies the same rule to a series.
package runmetrics
