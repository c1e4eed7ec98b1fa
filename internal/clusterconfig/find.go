package clusterconfig

import (
	"cmp"
	"slices"
	"strings"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// Candidate is a cluster offering an accelerator type, with the priority it
// gives that type (1 is the most preferred).
type Candidate struct {
	Cluster  *falconv1.Cluster
	Priority int32
}

// FindByAccelerator returns the clusters that list acceleratorType, by
// priority ascending and then by name, so equal clusters come in a stable
// order; no match is an empty result. Types match by canonical name
// (tpu7x finds a cluster listing v7x).
//
// It neither looks at status nor treats a cluster that lists no types (the
// local backend, which takes anything) as a candidate: it answers what the
// registry says a cluster offers, and choosing among the live ones is the
// resource manager's job.
func FindByAccelerator(clusters []*falconv1.Cluster, acceleratorType string) []Candidate {
	want := canonicalOrSelf(acceleratorType)
	var out []Candidate
	for _, c := range clusters {
		for _, s := range c.GetAccelerators() {
			if canonicalOrSelf(s.GetType()) == want {
				out = append(out, Candidate{Cluster: c, Priority: s.GetPriority()})
				break
			}
		}
	}
	slices.SortStableFunc(out, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(a.Priority, b.Priority), strings.Compare(a.Cluster.GetName(), b.Cluster.GetName()))
	})
	return out
}

// canonicalOrSelf is the canonical name of a known type, and an unknown one
// lower-cased, so clusters registered before a type was known still match.
func canonicalOrSelf(t string) string {
	if c, err := CanonicalType(t); err == nil {
		return c
	}
	return strings.ToLower(strings.TrimSpace(t))
}
