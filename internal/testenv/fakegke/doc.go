// Package fakegke is an in-process test server for the two Google Cloud APIs
// Falcon calls to run TPU and GPU node pools: GKE (container v1: clusters.get,
// nodePools create/get/list/delete, operations.get) and Compute (compute v1:
// reservations.get).
//
// No emulator of GKE exists, and faking Falcon's own interface would test
// nothing of the real client libraries, so the server speaks the real REST
// wire protocol instead: tests point google.golang.org/api/container/v1 and
// compute/v1 at it with option.WithEndpoint. Operations progress over time
// (PROVISIONING -> RUNNING, STOPPING -> gone) with configured latencies and
// an injectable clock, failures are injected per pool (quota exceeded,
// stockout, an operation that never finishes, delete failures, transient
// 5xx), and every call is recorded so tests can assert, for example, that a
// pool was created exactly once. GPU pools are checked as GKE checks them
// (an accelerator-optimized machine type such as a3-highgpu-8g comes with
// its GPUs, and an acceleratorConfig naming another type or count is
// refused with INVALID_ARGUMENT), from the fake's own table of machine
// types rather than Falcon's, and the pool returned carries the
// accelerators, implied ones included. OnPoolRunning and OnPoolDeleted let a
// harness join the fake to a real kube-apiserver by registering nodes.
package fakegke
