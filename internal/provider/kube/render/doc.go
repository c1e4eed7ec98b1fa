// Package render turns one Falcon job into the Kubernetes objects that run
// it: an Indexed batch/v1 Job per slice with one pod per host and, for a
// multi-host or multi-slice job, the headless Service that gives its ranks
// stable DNS names.
//
// It is pure — no client, no clock, no randomness — so that the kube
// provider's reconcile stays idempotent: the Job's name is the Falcon job ID,
// and rendering the same input twice yields identical objects, so a provider
// that crashed after creating the Job finds it again by name instead of
// creating a second one. Every decision about what a pod looks like lives
// here, where a table test can pin it, rather than in the code that talks to
// the API server.
//
// What a job's container sees (container "task"):
//
//	FALCON_EXP_ID, FALCON_JOB_ID, FALCON_ROLE   identity
//	FALCON_RANK         the pod's completion index (downward API), 0..replica-1
//	FALCON_WORLD_SIZE   replica
//	FALCON_ARTIFACT_DIR, ARTIFACT_LOCAL_DIR     /falcon/artifacts
//	CUSTOM_CONFIG_KEY   the experiment's config string
//	JAX_COORDINATOR_ADDRESS  <job>-0.<job>:8476 (multi-host only; 8476 is
//	                    the port JAX itself uses on TPU pods)
//	JAX_PROCESS_ID, JAX_NUM_PROCESSES           rank and replica (multi-host only)
//
// plus the task's own envs; Falcon's names win over a task env of the same
// name.
//
// A task of slices: N > 1 renders N Jobs, <job>-s<i>, each of replica pods
// labelled falcon.dev/slice and falcon.dev/first-rank (i*replica), pinned to
// the node pool placement.SlicePool(pool, i) when the job has a pool, under
// the one Service <job>. FALCON_RANK is then first-rank plus the index
// (added by the container's shell, since the downward API cannot add) and
// FALCON_WORLD_SIZE N*replica; JAX_* span the slices as JAX's own Cloud TPU
// detection sets them up for multislice (coordinator <job>-s0-0.<job>:8476,
// JAX_PROCESS_ID the rank across slices, N*replica processes), and
// MEGASCALE_COORDINATOR_ADDRESS (<job>-s0-0.<job>:8081), MEGASCALE_PORT,
// MEGASCALE_NUM_SLICES and MEGASCALE_SLICE_ID join the slices over DCN.
// GKE's webhook names each slice's workers (TPU_WORKER_HOSTNAMES) from its
// own Job: <job>-s<i>-<index>.<job>. On multi-host TPU slices GKE's webhook adds TPU_WORKER_ID and
// TPU_WORKER_HOSTNAMES (<job>-<i>.<job>, for one slice) itself, because the Job is Indexed,
// has a subdomain and requests google.com/tpu; Falcon does not set them, so
// the two can never disagree. Every literal the user wrote (command, env
// values, config) has its '$' doubled, because the kubelet expands $(VAR) in
// commands and env values and would otherwise turn a shell's $$ into $.
//
// Artifacts and logs go to the cluster's GCS bucket through GKE's GCS FUSE
// CSI driver (pod annotation gke-gcsfuse/volumes: "true"), one ephemeral
// volume per prefix, each scoped with only-dir so a job sees just its own
// files:
//
//	/falcon/artifacts  gs://<bucket>/experiments/<exp>/artifacts/<art>/
//	/falcon/logs       gs://<bucket>/logs/<job>/
//
// A gs:// artifact path on the job wins over the cluster bucket. Without a
// bucket the artifact dir is an emptyDir (it dies with the pod) and logs are
// only what `kubectl logs` keeps.
//
// With a bucket, each rank's stdout and stderr are also appended to
// gs://<bucket>/logs/<job>/<job>-<rank>.log. <job>-<rank> is the pod's
// hostname — the stable part of its name; the pod name adds a random suffix
// that nobody could derive — so the log of any rank is found from the job ID
// alone, as in the local provider. The user's command runs as
// `/bin/sh -c "$command"` with its output written into a FIFO that `tee -a`
// copies to both the log file and the container's stdout; the wrapper
// returns the command's own exit status (not tee's: /bin/sh may be a dash
// without pipefail), forwards SIGTERM to it so an abort reaches the task
// during the grace period, and gives tee at most 10 seconds to drain after
// the command exits, so a daemon the command left holding the FIFO cannot
// keep the pod alive.
//
// Deliberately absent: activeDeadlineSeconds (the controller enforces
// timeout_seconds from when the job started running, while a Kubernetes
// deadline would also count the time the pod waited for its node pool), a
// pod failure policy (backoffLimit 0: a failed rank fails the job) and the
// Service's owner reference, which needs the created Job's UID; see SetOwner.
package render
