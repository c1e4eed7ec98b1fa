// Package accelerator is Falcon's one table of accelerator facts: for every
// device type a user may write (v7x, tpu-v5p, v6e, nvidia-h100-80gb, cpu,
// ...) it knows the GKE node label, machine types, chips per host, JAX
// devices per chip and the shape of a valid slice topology.
//
// Those facts are needed in several places — validating a manifest, choosing
// a cluster, creating a node pool, rendering a Kubernetes Job — and each of
// them used to carry its own guess. A guess that disagrees with another is
// how a job ends up Pending forever on a node pool that can never fit it, so
// they live here once, as data, with no I/O and no Kubernetes types.
//
// Lookup finds a Spec by any of its names; (Spec).Slice checks a task's
// device_topo, replica and device_count against it and returns the Slice
// everything downstream needs (hosts, machine type, node selector, resource
// per host). Its errors are errdefs field errors whose paths are relative to
// a task spec, so callers prefix them with role_to_task_spec.<role>.
//
// The facts follow Google's GKE TPU and GPU documentation: multi-host TPU
// slices are built from hosts of 4 chips; v7x (Ironwood) exposes 2 JAX
// devices per chip and its multi-host node pools take a workload policy
// (--placement-policy) instead of --tpu-topology. Topologies are checked for
// shape (dimensions, whole hosts), not against GKE's list of offered sizes,
// which changes faster than this table.
//
// Each row also carries the vendor's published peak dense bf16 FLOP/s and
// HBM bandwidth of one chip or GPU (the source is beside the row), which
// profile analysis divides achieved figures by; DevicePeak gives them per
// JAX device, as a profile's device planes count them.
package accelerator
