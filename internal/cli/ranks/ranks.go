package ranks

import (
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/placement"
)

// Of is the job of role in exp (the only job when role is empty) and its
// number of ranks: replica hosts in each of its slices (placement.Ranks).
func Of(exp *falconv1.Experiment, role string) (*falconv1.Job, int32, error) {
	var roles []string
	for _, j := range exp.GetJobs() {
		if j.GetRole() == role || role == "" && len(exp.GetJobs()) == 1 {
			return j, int32(placement.Ranks(j.GetTaskSpec())), nil
		}
		roles = append(roles, j.GetRole())
	}
	if role == "" {
		return nil, 0, errdefs.Invalid("--role", "experiment %s has several roles (%s): name one", exp.GetId(), strings.Join(roles, ", "))
	}
	return nil, 0, errdefs.Invalid("--role", "experiment %s has no role %q; roles: %s", exp.GetId(), role, strings.Join(roles, ", "))
}

// Err is err said of one rank: prefix before its message, its code kept.
// A gRPC status is rebuilt rather than wrapped, so the CLI prints its
// message, not "rpc error: code = ...".
func Err(prefix string, err error) error {
	if st, ok := status.FromError(err); ok && st.Code() != codes.OK {
		return status.Errorf(st.Code(), "%s: %s", prefix, st.Message())
	}
	return fmt.Errorf("%s: %w", prefix, err)
}
