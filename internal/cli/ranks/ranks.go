package ranks

import (
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/placement"
)

// Target is one rank of one role.
type Target struct {
	Role string
	Rank int32
}

// String is how output marks a rank's lines, as exp logs does: role/rank.
func (t Target) String() string { return fmt.Sprintf("%s/%d", t.Role, t.Rank) }

// All is every rank of role in exp, or of every role when role is empty
// (by role, then rank): a role has replica hosts in each of its slices
// (placement.Ranks). A role exp does not have is refused, naming --role
// and the roles it has.
func All(exp *falconv1.Experiment, role string) ([]Target, error) {
	jobs := slices.Clone(exp.GetJobs())
	slices.SortFunc(jobs, func(a, b *falconv1.Job) int { return strings.Compare(a.GetRole(), b.GetRole()) })
	var out []Target
	var roles []string
	for _, j := range jobs {
		roles = append(roles, j.GetRole())
		if role != "" && j.GetRole() != role {
			continue
		}
		for rank := range placement.Ranks(j.GetTaskSpec()) {
			out = append(out, Target{Role: j.GetRole(), Rank: int32(rank)})
		}
	}
	if role != "" && !slices.Contains(roles, role) {
		return nil, errdefs.Invalid("--role", "experiment %s has no role %q; roles: %s", exp.GetId(), role, strings.Join(roles, ", "))
	}
	return out, nil
}

// Err is err said of one rank: prefix before its message, its code kept.
// A gRPC status is rebuilt rather than wrapped, so the CLI prints its
// message, not "rpc error: code = ...".
func Err(prefix string, err error) error {
	if _, ok := err.(interface{ GRPCStatus() *status.Status }); ok {
		return status.Errorf(errdefs.Code(err), "%s: %s", prefix, errdefs.Message(err))
	}
	return fmt.Errorf("%s: %w", prefix, err)
}
