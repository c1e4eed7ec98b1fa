// Package kubeenv starts real Kubernetes control planes for tests: each
// Cluster is one Falcon "edge cluster" made of etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler and kwok, run as child processes on
// loopback. A test may start several to stand for the many GKE clusters Falcon
// dispatches to.
//
// # Why real control planes
//
// What Falcon's Kubernetes backend depends on is behaviour of the real
// components: the scheduler honouring node selectors, taints and extended
// resources such as google.com/tpu; the Job controller's indexed completions,
// backoff limit, tracking finalizers and Complete/Failed conditions; garbage
// collection of a deleted Job's pods; admission, validation, RBAC, resource
// versions and watches. A fake clientset has none of it, so a test passing
// against one says little. Only the kubelet is simulated: kwok plays it for
// nodes annotated kwok.x-k8s.io/node=fake, following the Stages in kwok.yaml.
//
// # How
//
// Binaries: Kubernetes v1.37.2 and etcd 3.7 are built from the separate
// module hack/kubebins (its go.mod and go.sum pin every version), kwok v0.8.0
// with go install at the version in hack/kube-bins.sh. That script builds
// them into ${FALCON_CACHE:-~/.cache/falcon}/kube/<k8s version>-<hash>/bin,
// the hash covering the pins, the Go toolchain and the build flags, and
// prints the directory; a cache hit costs one `go env`. BinDir runs it, so a
// fresh clone builds on first use (tens of minutes on 2 cores with a cold Go
// build cache; the time is logged). $FALCON_KUBE_BIN points at prebuilt
// binaries instead. Tests never skip for want of binaries: they build them,
// or fail.
//
// Each cluster: loopback ports picked free at start; a directory (the test's
// TempDir under Start) holding etcd's data, a fresh CA, serving and client
// certificates and service-account key (ECDSA, generated in Go), the
// kubeconfigs and configs, and logs/<component>.log. The admin authenticates
// with a bearer token (the apiserver's static token file), the components
// with client certificates; authorization is RBAC and all of them are in
// system:masters. The controller manager runs the Job, garbage-collector,
// namespace, service-account and a few other controllers, not node
// lifecycle; the apiserver's TaintNodesByCondition plugin is off, so nodes
// carry only the taints a test gives them. Controller manager and scheduler
// run without leader election and ride out StopAPIServer/StartAPIServer.
// Every process runs in its own process group with a parent-death signal,
// and Stop (registered with t.Cleanup by Start) kills the groups, so nothing
// outlives the test, even a test binary killed by its timeout. When a test
// fails, the tail of each log is written to its output.
//
// kwok's Stages (kwok.yaml, replacing kwok's defaults) make a node Ready at
// once and a bound pod Running at once, with pod and host IPs and running
// containers. A pod whose restartPolicy is not Always then succeeds after
// AnnotationDuration (default 1s); with AnnotationExitCode it fails with that
// exit code (reason Error), with AnnotationOOMKilled it fails OOMKilled (137),
// and with AnnotationRunForever it keeps running. A deleted pod is terminated
// (exit 143) and removed once its finalizers are.
//
// kwok now and then loses the delayed Stage that ends a pod (seen on a
// loaded machine for pods bound to a node created the same instant): the
// pod stays Running for good. Every cluster watches its pods and nudges one
// Running StalledAfter past its end with an annotation (AnnotationNudged),
// a new event on which kwok plays the Stage it lost; each nudge is logged
// and counted (Nudged). Only the fake kubelet is repaired: what Falcon sees
// is the pod ending, as a kubelet would have ended it.
//
// Pod logs are served only by a cluster started WithPodLogs: kwok then plays
// the kubelet's log endpoint too, behind the real apiserver's pods/log, and
// ServePodLogs ties a pod's container to a log file the test writes.
//
// Measured on the 2-core development machine while other sessions compiled:
// a cluster is ready (apiserver ready, controller manager and scheduler
// healthy, default service account created) in 4.5-5 s, two started side by
// side in 6.5-8 s; AddNodes of 2 nodes to Ready takes 0.1-0.2 s; an indexed
// Job of 2 pods lasting 3 s completes in about 4.3 s; an apiserver restart is
// ready again in about 3 s. Stop takes a few tens of milliseconds.
package kubeenv
