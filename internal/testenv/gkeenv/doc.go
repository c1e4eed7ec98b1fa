// Package gkeenv joins fakegke's clusters to real Kubernetes control planes
// (kubeenv), so that an end-to-end test is real from Falcon's API to pods
// running on a node pool's nodes.
//
// fakegke speaks GKE's wire protocol but has no nodes; kubeenv has a real
// apiserver, scheduler and controllers but no node pools. Falcon's GKE
// backend needs both at once: it creates a pool through the container API,
// then connects to the cluster with the endpoint and CA that clusters.get
// returns and an OAuth2 token, and runs a Job whose pods must land on the
// pool's nodes. Join makes that path work end to end:
//
//   - clusters.get returns the kube-apiserver's address (as GKE does, a host
//     without scheme, so clients prepend https://) and its CA, base64 PEM;
//     TokenSource gives a token that apiserver accepts.
//   - When one of the cluster's pools turns RUNNING, its nodes are registered
//     as GKE would label, taint and size them: the node pool label, the TPU
//     accelerator and topology labels derived from the machine type, or for
//     a GPU pool the accelerator label and GPU count from its
//     acceleratorConfig (or the GPUs its machine type comes with) and the
//     driver version label when the pool installs a driver, the pool's
//     config labels and taints, GKE's automatic google.com/tpu or
//     nvidia.com/gpu taint, and the chips or GPUs as google.com/tpu or
//     nvidia.com/gpu capacity and allocatable. kwok then plays their
//     kubelets.
//   - When a pool is deleted, its nodes are drained (their pods deleted, as
//     GKE's drain evicts them) and removed.
//   - A ticker calls the server's Sync, so pools progress even when nobody
//     polls the fake.
//
// fakegke flips a pool's status before it runs the hooks, so a client other
// than the one whose request advanced the pool can see RUNNING (or the pool
// gone) a few hundred milliseconds before the nodes follow; tests wait with
// WaitNodes rather than assert right away. Errors in the hooks cannot fail
// the test from fakegke's goroutines; they are collected and reported when
// the Cluster is closed (at cleanup under Join).
package gkeenv
