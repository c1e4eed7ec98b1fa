// Package podlogs reads the output of a Falcon job's pods from where it is:
// from the Kubernetes pod log API (client-go, pods/<pod>/log) while the pods
// exist, and from the log objects in the cluster's bucket
// (logs/<job_id>/<pod>.log, written through GCS FUSE by the task's log
// wrapper) once they are gone. Both give the same Line: the pod, its role and
// rank (the Indexed Job's completion index), the text, and for pod logs the
// kubelet's timestamp. `falcon exp logs` is built on it for every Kubernetes
// backend; the API server picks the source.
//
// # Options
//
// Ranks, Since, Tail (lines per pod), Grep (RE2) and Follow mean what they
// mean to kubectl logs and to the Cloud Logging path, with two choices made
// explicit: Tail counts the lines that pass Grep (the last 10 matches, not
// the matches among the last 10 lines), which costs a full read of each log
// when both are set; and Since is applied exactly, where the kubelet's
// sinceTime has a resolution of one second.
//
// # Order
//
// Without Follow, pods are read one after the other in rank order (then pod
// name), each pod's lines in the order of its log. With Follow, every pod is
// read at once and lines are passed on as they arrive: each pod's lines stay
// in order, lines of different pods interleave. emit is never called
// concurrently.
//
// # Following
//
// A followed read ends when the caller's context ends, or when every pod it
// found has ended and been read to the end and the Job has finished (a
// Complete or Failed condition) or no longer exists; pods created meanwhile,
// such as ranks the Job controller starts late, are picked up. A pod's
// stream that breaks (an apiserver restart, a dropped connection, a
// container not started yet) is opened again from where it stopped, after a
// backoff. When a pod is seen to end while its stream is still open (kwok,
// unlike a kubelet, never closes it) the stream is closed and the rest read
// once more without following. A pod that is deleted ends its stream quietly:
// its log is then in the bucket (FromBucket).
//
// # Resuming
//
// Each Line carries its position: its timestamp and Seq, its place among the
// pod's lines with that same timestamp (1 for the first). A Cursor keeps the
// last position delivered per pod; a reader given Options.Resume asks the
// kubelet for lines since that second and drops every line at or before the
// position, so a client that reconnects (or a server that restarts and is
// handed the cursor back) neither loses nor repeats lines. That holds as
// long as the pod's log is the same file as before and its timestamps never
// go backwards, which is how container runtimes write them; it does not hold
// across a kubelet log rotation (the kubelet serves only the current file),
// where lines in the rotated part are lost to the pod log API but kept in the
// bucket. Counting lines that share a timestamp, rather than comparing text,
// keeps two identical lines with one timestamp (a progress message printed
// twice, two blank lines) apart. A resume needs no Tail and no Since; when
// given, Resume wins for the pods it names.
//
// Bucket objects carry no timestamps; their lines' position is the byte
// offset where the next line starts (Line.Offset), and resuming reads from
// there.
package podlogs
