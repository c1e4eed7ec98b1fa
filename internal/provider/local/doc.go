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
// disk, written before it is acted on and always atomically (temp file and
// rename), and its memory is only a cache of that:
//
//	<dataDir>/run/.lock                    locked by the live Executor
//	<dataDir>/run/<jobID>/job.json         written before any rank starts
//	<dataDir>/run/<jobID>/<rank>/          the rank's working directory
//	<dataDir>/run/<jobID>/<rank>/pid       pid (= pgid), start time, boot ID
//	<dataDir>/run/<jobID>/<rank>/exit      how the rank ended (JSON)
//	<dataDir>/logs/<jobID>/<pod>.log       stdout and stderr, appended
//	<dataDir>/experiments/<expID>/artifacts/<artifactID>/
//	                                       FALCON_ARTIFACT_DIR, shared by all ranks
//
// A job is known once job.json exists, and finished once every rank has an
// exit marker. A rank with a pid file but no exit marker after a restart was
// running when the previous Falcon process died; nobody can observe its exit
// any more, so Recover kills what is left of it and records it as lost. Jobs
// are not adopted across restarts on purpose: an adopted process is not our
// child, so its exit code would be unknowable, and a job whose result cannot
// be known is better failed loudly than reported as a guess.
//
// Only one Executor may own a data directory at a time (the lock), because
// recovery kills every process it cannot account for.
package local
