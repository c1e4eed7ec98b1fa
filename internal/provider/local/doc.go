// Package local runs Falcon jobs as process groups on this machine. It is the
// cluster backend of `falcon dev`, where a developer wants the whole platform
// on a laptop without Kubernetes: each rank of a job, which would be one pod
// of an Indexed Job on a cluster, is one `/bin/sh -c "$Command"` in a process
// group of its own, named like the pod it replaces (<jobID>-<rank>). A task's
// resources (CPU, memory, ephemeral-storage) are ignored: ranks share the
// machine as any processes do, with no requests or limits enforced.
//
// The resource manager calls Start, Status and Kill with the job ID as the
// only key, and expects every call to be idempotent and every answer to
// survive a restart of the Falcon process. So the executor keeps the truth on
// disk, written before it is acted on and always atomically (a temp file,
// then a rename, or a link where an existing file must win), and its memory
// is only a cache of that:
//
//	<dataDir>/run/.lock                    locked by the live Executor
//	<dataDir>/run/<jobID>/job.json         written before any rank starts
//	<dataDir>/run/<jobID>/stop             why Falcon stops the job, before any signal
//	<dataDir>/run/<jobID>/<rank>/          the rank's working directory
//	<dataDir>/run/<jobID>/<rank>/pid       the supervisor's pid, start time, boot ID
//	<dataDir>/run/<jobID>/<rank>/exit      how the rank ended (JSON)
//	<dataDir>/logs/<jobID>/<pod>.log       stdout and stderr, appended
//	<dataDir>/experiments/<expID>/artifacts/<artifactID>/
//	                                       FALCON_ARTIFACT_DIR, shared by all ranks
//
// Ranks outlive the Falcon process. Each rank is started under a supervisor
// (supervisor.go): this binary re-executed in a hidden mode, in a session of
// its own, which runs the command, waits for it and writes the exit marker
// with its exit code or signal, whether or not Falcon still runs. Shutdown
// leaves ranks running, a crash cannot stop them, and the next Executor
// adopts every rank whose supervisor is still alive: the same pid, start
// time and boot as its pid file records, never a recycled pid. It watches it
// through a pidfd, signals it through the same pidfd, and reads the marker
// when it ends, so an adopted rank is reported exactly as one this executor
// started. The command's descriptors point at the log file, so the log goes
// on being appended across restarts.
//
// A job is known once job.json exists, and finished once every rank has an
// exit marker. Only a rank whose supervisor died without writing one (it
// was SIGKILLed) has no true account: it is recorded as unrecorded
// (ReasonUnrecorded), saying whether it ended while Falcon ran or while it
// did not, and what the rank left running is killed, since nothing could
// report on it any more. Ranks Falcon stops itself (Kill, or the other ranks
// of a failed job) are recorded with why, from the stop file, never as
// unexplained.
//
// Only one Executor may own a data directory at a time (the lock), because
// two would both watch, signal and record the same ranks.
//
// Linux only, 5.3 or later: processes are identified through /proc, reaped
// through waitid(WNOWAIT) and adopted through pidfds.
package local
