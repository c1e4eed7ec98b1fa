package placement

import (
	"strconv"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// Slices is how many slices a task runs on together: its slices field, or
// one when it gives none.
func Slices(t *falconv1.TaskSpec) int { return int(max(t.GetSlices(), 1)) }

// Ranks is how many hosts, and so ranks, a task runs on over all its
// slices: rank r is host r%replica of slice r/replica.
func Ranks(t *falconv1.TaskSpec) int { return Slices(t) * int(t.GetReplica()) }

// SlicePool names the node pool of slice i in the pool group named group:
// a multi-slice job on GKE holds one node pool per slice, acquired,
// reused and released together under the group's name, which is what the
// resource manager records as the job's node pool. The Kubernetes Job of
// slice i is pinned to SlicePool(group, i). Deterministic, so a restarted
// controller finds every member it was creating.
func SlicePool(group string, slice int) string { return group + "-s" + strconv.Itoa(slice) }

// MaxSlicePoolSuffix is the most SlicePool adds to a group's name, for the
// largest slice index validation allows (MaxSlices-1).
const MaxSlicePoolSuffix = len("-s99")

// GroupShape is the pool shape of a group of slices pools of one shape
// (2x2x4-2slices): a group serves only a task of the same slice count,
// so it is labelled and matched for reuse as a shape of its own. One slice
// is the shape itself.
func GroupShape(shape string, slices int) string {
	if slices <= 1 {
		return shape
	}
	return shape + "-" + strconv.Itoa(slices) + "slices"
}
