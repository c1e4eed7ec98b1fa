package placement

import falconv1 "github.com/falconhq/falcon/api/falcon/v1"

// Slices is how many slices a task runs on together: its slices field, or
// one when it gives none.
func Slices(t *falconv1.TaskSpec) int { return int(max(t.GetSlices(), 1)) }

// Ranks is how many hosts, and so ranks, a task runs on over all its
// slices: rank r is host r%replica of slice r/replica.
func Ranks(t *falconv1.TaskSpec) int { return Slices(t) * int(t.GetReplica()) }
