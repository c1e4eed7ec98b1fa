package placement

import (
	"fmt"
	"slices"
	"strings"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/store"
)

// DeviceType is a task's accelerator under its canonical name: the registry
// stores canonical names while users write aliases (tpu7x, h100), and a task
// that names none runs on CPUs. A name unknown to this build is returned as
// written, so that it matches nothing rather than something else.
func DeviceType(deviceType string) string {
	if spec, err := accelerator.Lookup(deviceType); err == nil {
		return spec.Name
	}
	if deviceType == "" {
		return "cpu"
	}
	return deviceType
}

// Offers returns the accelerator types c lists, by canonical name, with the
// registry's preference turned into the scheduler's (higher is better): its
// slots' priorities negated (priority 1 is best), then accelerator_types in
// order for rows that have no slots. It is empty for a cluster that lists no
// types; such a cluster is a fallback (see Fallback), not a cluster offering
// nothing.
func Offers(c *falconv1.Cluster) map[string]int {
	out := map[string]int{}
	for _, a := range c.GetAccelerators() {
		out[a.GetType()] = -int(a.GetPriority())
	}
	for i, t := range c.GetAcceleratorTypes() {
		t = DeviceType(t)
		if _, ok := out[t]; !ok {
			out[t] = -i - 1
		}
	}
	return out
}

// Fallback reports whether c lists no accelerator types. Such a cluster (the
// local machine) takes exactly the types no registered cluster offers, so
// that `falcon dev` runs any manifest, yet a TPU job waits for the real TPU
// clusters when there are any, even while they are in maintenance.
func Fallback(c *falconv1.Cluster) bool {
	return len(c.GetAccelerators()) == 0 && len(c.GetAcceleratorTypes()) == 0
}

// Offered is the set of types some registered cluster lists, whatever its
// status: a type offered by a cluster in maintenance waits for it rather
// than falling back.
func Offered(clusters []*falconv1.Cluster) map[string]bool {
	out := map[string]bool{}
	for _, c := range clusters {
		for t := range Offers(c) {
			out[t] = true
		}
	}
	return out
}

// Takes reports whether cluster c would take a task of (canonical) type
// typ, given every registered cluster: c lists typ, or c is a fallback and
// no registered cluster lists typ.
func Takes(c *falconv1.Cluster, typ string, clusters []*falconv1.Cluster) bool {
	if Fallback(c) {
		return !Offered(clusters)[typ]
	}
	_, ok := Offers(c)[typ]
	return ok
}

// Candidates returns the clusters a task of (canonical) type typ may be
// placed on. A pinned task has one candidate, its cluster, whatever its
// status (the task waits for it); a PinError when that cluster is not
// registered or does not take typ. Otherwise the candidates are the
// clusters that take typ and are active, since those are the ones a task
// is placed on now; when none is active, every cluster that takes typ,
// since the task waits for one of them. No candidate at all is not an
// error here: the resource manager fails such a task with
// NoAvailableClusterError once it tries to place it.
func Candidates(clusters []*falconv1.Cluster, typ, pin string) ([]*falconv1.Cluster, error) {
	if pin != "" {
		i := slices.IndexFunc(clusters, func(c *falconv1.Cluster) bool { return c.GetName() == pin })
		if i < 0 {
			return nil, &PinError{Cluster: pin, Type: typ}
		}
		c := clusters[i]
		if !Takes(c, typ, clusters) {
			return nil, &PinError{Cluster: pin, Type: typ, Registered: true, Offers: types(c), OfferedBy: takers(clusters, typ)}
		}
		return []*falconv1.Cluster{c}, nil
	}
	var taking, active []*falconv1.Cluster
	for _, c := range clusters {
		if !Takes(c, typ, clusters) {
			continue
		}
		taking = append(taking, c)
		if c.GetStatus() == store.ClusterActive {
			active = append(active, c)
		}
	}
	if len(active) > 0 {
		return active, nil
	}
	return taking, nil
}

// PinError says why a pinned cluster cannot take a task.
type PinError struct {
	Cluster, Type string
	// Registered is false for a cluster name the registry does not know.
	Registered bool
	// Offers lists what the cluster lists, in its order of preference;
	// empty for a fallback cluster.
	Offers []string
	// OfferedBy names the clusters that do take Type.
	OfferedBy []string
}

func (e *PinError) Error() string {
	switch {
	case !e.Registered:
		return fmt.Sprintf("cluster %s is not registered", e.Cluster)
	case len(e.Offers) == 0:
		// Only a fallback refuses a type this way: someone else offers it.
		return fmt.Sprintf("cluster %s lists no accelerator types, so it takes only the types no other registered cluster offers, and %s is offered by %s",
			e.Cluster, e.Type, strings.Join(e.OfferedBy, ", "))
	}
	return fmt.Sprintf("cluster %s does not offer %s; it offers %s", e.Cluster, e.Type, strings.Join(e.Offers, ", "))
}

// types lists what c lists, most preferred first.
func types(c *falconv1.Cluster) []string {
	offers := Offers(c)
	out := make([]string, 0, len(offers))
	for t := range offers {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b string) int {
		if offers[a] != offers[b] {
			return offers[b] - offers[a]
		}
		return strings.Compare(a, b)
	})
	return out
}

// takers names the clusters that take typ, in the registry's order.
func takers(clusters []*falconv1.Cluster, typ string) []string {
	var out []string
	for _, c := range clusters {
		if Takes(c, typ, clusters) {
			out = append(out, c.GetName())
		}
	}
	return out
}
