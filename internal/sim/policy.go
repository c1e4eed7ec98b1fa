package sim

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/falconhq/falcon/internal/resourcemanager"
	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// Policy is one way of running the controller, by the names falcon sim
// takes: each maps to options the controller itself has, so a policy that
// wins here is switched on there under the same name.
type Policy struct {
	Name string
	// Selection is the cluster choice (queue.PolicySpread is 000's).
	Selection queue.Policy
	// NoReuse: a pool per job (resourcemanager.WithoutPoolReuse).
	NoReuse bool
	// Linger keeps an idle pool this long (resourcemanager.WithPoolLinger).
	Linger time.Duration
	// Cap bounds the pools of one shape on a cluster
	// (resourcemanager.WithPoolCap); 0: no bound.
	Cap int
}

// ManagerOptions are the resource manager's options for the policy's pool
// rule: what falcon controller --pool-policy runs. The cluster choice
// (Selection) is the registry's, not an option of the manager.
func (p Policy) ManagerOptions() []resourcemanager.Option {
	var opts []resourcemanager.Option
	if p.NoReuse {
		opts = append(opts, resourcemanager.WithoutPoolReuse())
	}
	if p.Linger > 0 {
		opts = append(opts, resourcemanager.WithPoolLinger(p.Linger))
	}
	if p.Cap > 0 {
		opts = append(opts, resourcemanager.WithPoolCap(p.Cap))
	}
	return opts
}

// PolicyNames are the policies falcon sim knows; terms join with "+"
// (priority+linger=20m).
const PolicyNames = "spec, per-job, linger=DUR (e.g. linger=15m), cap=N (e.g. cap=4), priority"

// ParsePolicy reads one --policy value.
func ParsePolicy(s string) (Policy, error) { return ParsePolicyFlag("--policy", s) }

// ParsePolicyFlag reads a policy given by flag (its errors name it), so
// that the controller's --pool-policy takes the names falcon sim compares.
func ParsePolicyFlag(flag, s string) (Policy, error) {
	p := Policy{Name: s, Selection: queue.PolicySpread}
	if strings.TrimSpace(s) == "" {
		return Policy{}, fmt.Errorf("%s: empty; valid policies: %s", flag, PolicyNames)
	}
	for _, term := range strings.Split(s, "+") {
		switch name, arg, hasArg := strings.Cut(strings.TrimSpace(term), "="); {
		case name == "spec" && !hasArg:
		case name == "per-job" && !hasArg:
			p.NoReuse = true
		case name == "priority" && !hasArg:
			p.Selection = queue.PolicyPriority
		case name == "cap" && hasArg:
			n, err := strconv.Atoi(arg)
			if err != nil || n <= 0 {
				return Policy{}, fmt.Errorf("%s %s: cap takes a positive number of pools (cap=4), got %q", flag, s, arg)
			}
			p.Cap = n
		case name == "linger" && hasArg:
			d, err := time.ParseDuration(arg)
			if err != nil || d <= 0 {
				return Policy{}, fmt.Errorf("%s %s: linger takes a positive duration (linger=15m), got %q", flag, s, arg)
			}
			p.Linger = d
		default:
			return Policy{}, fmt.Errorf("%s %s: unknown policy %q; valid policies: %s", flag, s, term, PolicyNames)
		}
	}
	if p.NoReuse && p.Linger > 0 {
		return Policy{}, fmt.Errorf("%s %s: per-job deletes every pool when its job ends, so it cannot linger", flag, s)
	}
	return p, nil
}
