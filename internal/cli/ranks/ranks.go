package ranks

import (
	"strings"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
)

// Of is the job of role in exp (the only job when role is empty) and its
// number of ranks: replica hosts in each of its slices.
func Of(exp *falconv1.Experiment, role string) (*falconv1.Job, int32, error) {
	var roles []string
	for _, j := range exp.GetJobs() {
		if j.GetRole() == role || role == "" && len(exp.GetJobs()) == 1 {
			return j, j.GetTaskSpec().GetReplica() * max(j.GetTaskSpec().GetSlices(), 1), nil
		}
		roles = append(roles, j.GetRole())
	}
	if role == "" {
		return nil, 0, errdefs.Invalid("--role", "experiment %s has several roles (%s): name one", exp.GetId(), strings.Join(roles, ", "))
	}
	return nil, 0, errdefs.Invalid("--role", "experiment %s has no role %q; roles: %s", exp.GetId(), role, strings.Join(roles, ", "))
}
