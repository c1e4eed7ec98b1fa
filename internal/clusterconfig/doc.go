// Package clusterconfig is the cluster registry's configuration as code: it
// reads a clusters file (the YAML an operator keeps in Git and applies with
// `falcon cluster apply`) into API clusters, and holds the one set of rules a
// cluster registration must satisfy, whichever way it arrives.
//
// A file maps cluster names to their settings, beside the settings of the
// registry as a whole:
//
//	selection: priority      # spread (the default) | priority
//	clusters:
//	  tpu-v5p-prod:
//	    provider: gke            # gke | kubernetes | local | xpk
//	    project: my-project      # gke, xpk: required
//	    zone: us-east5-a         # gke, xpk: required (or location:)
//	    cluster_id: tpu-cluster  # gke, xpk: required, the GKE cluster name
//	    xpk_path: /usr/bin/xpk   # xpk: default xpk on PATH; must exist when applied
//	    extra_args: [--spot]     # xpk: appended to workload create; no flag Falcon sets
//	    probe_timeout_s: 15      # a health probe's limit (default 15, at most 300)
//	    accelerator_types:
//	      - {type: v5p, device_class: tpu, priority: 1}  # device_class: tpu | gpu
//	    default_namespace: falcon
//	    service_account: falcon-jobs  # pods run as it (default: the namespace's default)
//	    gcs_bucket: gs://falcon-tpu
//	    max_queue_depth: 5
//
// selection is the policy that places jobs on the clusters (package
// queue's Policy): spread, design 000's (an idle pool of the job's shape,
// then the shortest queue), or priority, design 001's (the most preferred
// cluster whose last probe answered and whose queue depth is at most
// max_queue_depth). It is one setting of the registry, not of a cluster,
// because it ranks the clusters against each other; ParseRegistry returns
// it with the clusters, the API server stores it in its own row
// (registry_settings) when the file is applied, and a file that does not
// name it sets spread, since the file is the whole registry. ParseOne, for
// `falcon cluster create`, refuses it: create changes no registry setting.
//
// Parsing is strict, because a typo in a registry silently sends hours of TPU
// time to the wrong place: unknown keys, wrong types and malformed YAML are
// errors, every error names its path and line (clusters.tpu-v5p-prod.project:
// is required for provider gke), all errors of a file are reported together,
// and any error refuses the whole file. Errors are errdefs.FieldErrors, so
// they reach users as InvalidArgument.
//
// Normalize is the same rule set in the API's vocabulary; the API server runs
// it on RegisterCluster and ApplyClusters requests, so a file checked here
// and a request from any other client are held to one standard. It also puts
// a cluster in the form the registry stores: accelerator types by their
// canonical names (package accelerator), slots ordered by priority, the bare
// bucket name, the default status.
//
// FindByAccelerator answers the registry's query of design 001: the clusters
// offering an accelerator type, most preferred (lowest priority) first.
package clusterconfig
