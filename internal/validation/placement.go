package validation

import (
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/placement"
)

// Placement checks an experiment that passed Experiment against the
// registered clusters, refusing what no cluster it could be placed on can
// run, which would otherwise wait or fail long after the user has walked
// away:
//   - a task whose device type the pinned cluster (cluster_name) does not
//     take;
//   - a task without an image when every cluster that could run it runs
//     tasks in containers (kubernetes, gke);
//   - a task whose command, envs and config exceed a limit of the backend
//     of every cluster that could run it;
//   - a multi-slice task when every cluster that could run it runs one
//     slice per task (kubernetes, gke).
//
// "Could run it" is placement.Candidates, the resource manager's own rule.
// A task that no registered cluster could take is not refused here (a
// server may be asked before its registry is filled): the resource manager
// fails it in its first cycle with NoAvailableClusterError, naming every
// cluster and its last probe (resourcemanager's planUnplaceable).
func Placement(e *falconv1.Experiment, clusters []*falconv1.Cluster) error {
	var errs errdefs.FieldErrors
	roles := make([]string, 0, len(e.GetRoleToTaskSpec()))
	for r := range e.GetRoleToTaskSpec() {
		roles = append(roles, r)
	}
	sort.Strings(roles)
	pin := e.GetClusterName()
	for _, r := range roles {
		t, path := e.GetRoleToTaskSpec()[r], "role_to_task_spec."+r
		typ := placement.DeviceType(t.GetDeviceType())
		cands, err := placement.Candidates(clusters, typ, pin)
		var pe *placement.PinError
		switch {
		case errors.As(err, &pe) && !pe.Registered:
			errs.Add("cluster_name", "unknown cluster %q", pin)
			continue
		case errors.As(err, &pe):
			errs.Add(path+".device_type", "%s cannot run on cluster_name %s: %s", typeName(t), pin, pinAdvice(pe))
			continue
		case err != nil:
			errs.Add(path, "%v", err)
			continue
		}
		where := "the clusters that could take it (" + strings.Join(names(cands), ", ") + ")"
		if pin != "" {
			where = "its cluster_name " + pin
		}
		if _, all := placement.ImageNeeders(cands); all && strings.TrimSpace(t.GetImage()) == "" {
			errs.Add(path+".image", "is required: the task can only run in a container, on %s (backend %s); name the container image the command runs in (e.g. python:3.12), or pin a cluster of the local backend, which needs none",
				where, strings.Join(backendsOf(cands), ", "))
		}
		if over, all := placement.Overflows(cands, t, e.GetConfig()); all {
			var parts []string
			for _, o := range over {
				parts = append(parts, fmt.Sprintf("the %s backend (%s) needs at least %d bytes, over its limit of %d: %s",
					o.Backend.Name, strings.Join(o.Clusters, ", "), o.Size, o.Backend.Limit, o.Backend.LimitName))
			}
			errs.Add(path+".command", "is %d bytes, and with the task's envs and the experiment's config it cannot run on %s: %s; put large scripts and data in the image or the artifact dir and read them from there",
				len(t.GetCommand()), where, strings.Join(parts, "; "))
		}
	}
	return errs.Err()
}

// typeName is the task's device type as the user should read it.
func typeName(t *falconv1.TaskSpec) string {
	if t.GetDeviceType() == "" {
		return "cpu (no device_type)"
	}
	return placement.DeviceType(t.GetDeviceType())
}

// pinAdvice says why the pinned cluster refuses the type and what would be
// allowed instead.
func pinAdvice(pe *placement.PinError) string {
	others := "no registered cluster offers " + pe.Type
	if len(pe.OfferedBy) > 0 {
		others = "pin one that offers " + pe.Type + " (" + strings.Join(pe.OfferedBy, ", ") + ")"
	}
	if len(pe.Offers) == 0 {
		return fmt.Sprintf("it lists no accelerator types, so it takes only the types no other registered cluster offers; %s, or leave cluster_name empty", others)
	}
	return fmt.Sprintf("it offers %s; use one of those, %s, or leave cluster_name empty", strings.Join(pe.Offers, ", "), others)
}

func names(cs []*falconv1.Cluster) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.GetName()
	}
	return out
}

// backendsOf lists the distinct backends of cs, in order.
func backendsOf(cs []*falconv1.Cluster) []string {
	var out []string
	for _, c := range cs {
		if b := c.GetBackend(); !slices.Contains(out, b) {
			out = append(out, b)
		}
	}
	return out
}
