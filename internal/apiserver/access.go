package apiserver

import (
	"context"
	"fmt"
	"strings"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/errdefs"
)

// callers says who may call a method.
type callers int

const (
	// forUsers: people and service tokens. Controllers act for the system
	// and never create, abort or delete on anyone's behalf.
	forUsers callers = iota + 1
	// forAll: users and controllers (reads).
	forAll
	// forControllers: the internal methods. They have no HTTP route, and
	// a user calling them over gRPC, admins included, is refused.
	forControllers
	// forAdmins: the configured admins (see Server.isAdmin). Cluster
	// writes decide where everyone's jobs run, the audit log shows
	// everyone's calls and the user list everyone's email, and a relink
	// decides which identity acts as a user, so none is any user's or
	// service token's.
	forAdmins
	// forAdminsAndControllers: admins, and controllers for what the
	// handler lets them do: RegisterCluster of the local cluster a
	// controller runs (falcon controller --local-cluster).
	forAdminsAndControllers
)

// rule is how the server treats one method.
type rule struct {
	callers callers
	// audit, when set, makes the call a mutation recorded in the audit
	// log. It names the entity the request acts on, and reports false for
	// requests that change nothing (validate_only, dry_run).
	audit func(req any) (target string, record bool)
}

// rules classifies every method the server registers; a method missing
// here is refused to everyone (TestEveryMethodIsClassified keeps the table
// complete).
var rules = map[string]rule{
	falconv1.ExperimentService_CreateExp_FullMethodName: {forUsers, func(r any) (string, bool) {
		req := r.(*falconv1.CreateExpRequest)
		return req.GetExperiment().GetName(), !req.GetValidateOnly()
	}},
	falconv1.ExperimentService_AbortExp_FullMethodName: {forUsers, func(r any) (string, bool) {
		return r.(*falconv1.AbortExpRequest).GetId(), true
	}},
	falconv1.ExperimentService_DeleteExp_FullMethodName: {forUsers, func(r any) (string, bool) {
		return r.(*falconv1.DeleteExpRequest).GetId(), true
	}},
	// A stream: the handler writes the audit row once the session ends,
	// with its exit code and duration (the interceptor sees no request).
	falconv1.ExperimentService_ExecExp_FullMethodName:           {forUsers, func(any) (string, bool) { return "", false }},
	falconv1.ExperimentService_GetExp_FullMethodName:            {callers: forAll},
	falconv1.ExperimentService_ListExps_FullMethodName:          {callers: forAll},
	falconv1.ExperimentService_GetExpLogs_FullMethodName:        {callers: forAll},
	falconv1.ExperimentService_WatchExp_FullMethodName:          {callers: forAll},
	falconv1.ExperimentService_UpdateExpStatus_FullMethodName:   {callers: forControllers},
	falconv1.ExperimentService_UpdateExpStatuses_FullMethodName: {callers: forControllers},
	falconv1.ExperimentService_ExtendExp_FullMethodName: {forUsers, func(r any) (string, bool) {
		return r.(*falconv1.ExtendExpRequest).GetId(), true
	}},
	// The server decides by its own clock; what an expiry does shows in the
	// experiment's Message and events, not the audit log.
	falconv1.ExperimentService_EnforceTTL_FullMethodName: {callers: forControllers},

	falconv1.JobService_GetJob_FullMethodName:            {callers: forAll},
	falconv1.JobService_ListJobs_FullMethodName:          {callers: forAll},
	falconv1.JobService_ListJobHistory_FullMethodName:    {callers: forAdmins}, // everyone's jobs (falcon sim --from-db), as the audit log
	falconv1.JobService_UpdateJobStatus_FullMethodName:   {callers: forControllers},
	falconv1.JobService_AbortJob_FullMethodName:          {callers: forControllers},
	falconv1.JobService_AppendJobMessage_FullMethodName:  {callers: forControllers},
	falconv1.JobService_UpdateJobStatuses_FullMethodName: {callers: forControllers},
	falconv1.JobService_WatchChanges_FullMethodName:      {callers: forControllers},

	falconv1.ArtifactService_GetArtifact_FullMethodName:       {callers: forAll},
	falconv1.ArtifactService_ListArtifacts_FullMethodName:     {callers: forAll},
	falconv1.ArtifactService_ListArtifactFiles_FullMethodName: {callers: forAll},
	falconv1.ArtifactService_ReadArtifactFile_FullMethodName:  {callers: forAll},
	falconv1.ArtifactService_StatArtifactFile_FullMethodName:  {callers: forAll},
	falconv1.ExperimentService_GetExpMetrics_FullMethodName:   {callers: forAll},
	falconv1.ExperimentService_ExportExpLogs_FullMethodName: {forUsers, func(r any) (string, bool) {
		return r.(*falconv1.ExportExpLogsRequest).GetId(), true
	}},
	falconv1.ArtifactService_UpdateArtifactStatus_FullMethodName:   {callers: forControllers},
	falconv1.ArtifactService_UpdateArtifactStatuses_FullMethodName: {callers: forControllers},

	falconv1.ClusterService_GetCluster_FullMethodName:          {callers: forAll},
	falconv1.ClusterService_ListClusters_FullMethodName:        {callers: forAll},
	falconv1.ClusterService_GetClusterStatus_FullMethodName:    {callers: forAll},
	falconv1.ClusterService_ReportClusterStatus_FullMethodName: {callers: forControllers},
	falconv1.ClusterService_ListClusterProbes_FullMethodName:   {callers: forAll},
	// Probing on demand costs every cluster a call, not a write of
	// anyone's data: anyone who may read the registry may ask.
	falconv1.ClusterService_ProbeClusters_FullMethodName:       {callers: forAll},
	falconv1.ClusterService_ReportClusterProbes_FullMethodName: {callers: forControllers},
	falconv1.ClusterService_RegisterCluster_FullMethodName: {forAdminsAndControllers, func(r any) (string, bool) {
		return r.(*falconv1.RegisterClusterRequest).GetCluster().GetName(), true
	}},
	falconv1.ClusterService_ApplyClusters_FullMethodName: {forAdmins, func(r any) (string, bool) {
		return "", !r.(*falconv1.ApplyClustersRequest).GetDryRun()
	}},
	falconv1.ClusterService_SetClusterStatus_FullMethodName: {forAdmins, func(r any) (string, bool) {
		return r.(*falconv1.SetClusterStatusRequest).GetName(), true
	}},

	falconv1.UserService_GetCurrentUser_FullMethodName: {callers: forUsers},
	// Everyone's emails are the admins' to see, and moving a user to
	// another identity decides who acts as them.
	falconv1.UserService_ListUsers_FullMethodName: {callers: forAdmins},
	falconv1.UserService_RelinkUser_FullMethodName: {forAdmins, func(r any) (string, bool) {
		return strings.ToLower(strings.TrimSpace(r.(*falconv1.RelinkUserRequest).GetEmail())), true
	}},

	falconv1.AuditService_ListAuditEvents_FullMethodName: {callers: forAdmins},

	falconv1.AnalysisService_CreateAnalysis_FullMethodName: {forUsers, func(r any) (string, bool) {
		if ids := r.(*falconv1.CreateAnalysisRequest).GetExpIds(); len(ids) > 0 {
			return ids[0], true
		}
		return "", true
	}},
	falconv1.AnalysisService_GetAnalysis_FullMethodName:    {callers: forAll},
	falconv1.AnalysisService_ListAnalyses_FullMethodName:   {callers: forAll},
	falconv1.AnalysisService_ClaimAnalysis_FullMethodName:  {callers: forControllers},
	falconv1.AnalysisService_FinishAnalysis_FullMethodName: {callers: forControllers},
}

// authorize decides whether p (an admin when admin is set) may call method
// at all; what it may do to a particular entity is the handler's to check
// (see mayChange, RegisterCluster).
func authorize(p auth.Principal, admin bool, method string) error {
	r, ok := rules[method]
	switch {
	case !ok:
		return fmt.Errorf("%w: %s is not open to any caller", errdefs.ErrPermissionDenied, method)
	case r.callers == forControllers && !p.IsController():
		return fmt.Errorf("%w: %s is internal to Falcon's controllers", errdefs.ErrPermissionDenied, method)
	case r.callers == forUsers && p.IsController(),
		r.callers == forAdmins && p.IsController():
		return fmt.Errorf("%w: controllers may not call %s", errdefs.ErrPermissionDenied, method)
	case (r.callers == forAdmins || r.callers == forAdminsAndControllers) && !p.IsController() && !admin:
		return fmt.Errorf("%w: %s: an admin is required; %s is not an admin of this server",
			errdefs.ErrPermissionDenied, shortMethod(method), p.Display())
	}
	return nil
}

// shortMethod is a method's name without its service (AbortExp), as
// people call it.
func shortMethod(full string) string { return full[strings.LastIndex(full, "/")+1:] }

// auditNote is the audit record of the call in progress; handlers refine
// what the request alone cannot say (the ID of what was created, what an
// apply changed).
type auditNote struct {
	target string
	detail string
}

type auditKey struct{}

// noteAudit sets the target (when not empty) of the current call's audit
// record and adds detail to it; calls that are not audited ignore it.
func noteAudit(ctx context.Context, target, detail string) {
	n, ok := ctx.Value(auditKey{}).(*auditNote)
	if !ok {
		return
	}
	if target != "" {
		n.target = target
	}
	switch {
	case detail == "":
	case n.detail == "":
		n.detail = detail
	default:
		n.detail += "; " + detail
	}
}
