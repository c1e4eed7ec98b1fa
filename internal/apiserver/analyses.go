package apiserver

import (
	"context"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/changefeed"
	"github.com/falconhq/falcon/internal/compare"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

var _ falconv1.AnalysisServiceServer = (*Server)(nil)

// analysisStale is how long a claimed analysis may run before another
// controller may take it over: its controller is then taken to have
// stopped. A 1 GiB profile is analysed in seconds.
const analysisStale = 10 * time.Minute

// analysisKinds says how many experiments each kind takes and which
// params it accepts.
var analysisKinds = map[string]struct {
	exps   int
	params []string
}{
	"accuracy":        {2, []string{"path", "rtol", "atol"}},
	"profile":         {1, []string{"rank", "session", "device_type"}},
	"profile_compare": {2, []string{"rank", "session", "device_type", "device_type_b"}},
}

// CreateAnalysis queues an analysis; the analysis controller runs it.
func (s *Server) CreateAnalysis(ctx context.Context, req *falconv1.CreateAnalysisRequest) (*falconv1.Analysis, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	k, ok := analysisKinds[req.GetKind()]
	if !ok {
		kinds := make([]string, 0, len(analysisKinds))
		for n := range analysisKinds {
			kinds = append(kinds, n)
		}
		slices.Sort(kinds)
		return nil, errdefs.Invalid("kind", "%q is not an analysis; allowed: %s", req.GetKind(), strings.Join(kinds, ", "))
	}
	expIDs := req.GetExpIds()
	if len(expIDs) != k.exps {
		return nil, errdefs.Invalid("exp_ids", "%s takes %d experiments, got %d", req.GetKind(), k.exps, len(expIDs))
	}
	if k.exps > 1 {
		if err := compare.CheckIDs(expIDs); err != nil {
			return nil, errdefs.Invalid("exp_ids", "%v", err)
		}
	}
	var exps []*store.Experiment
	for i, id := range expIDs {
		if err := checkID("exp_ids["+strconv.Itoa(i)+"]", ids.Experiment, id); err != nil {
			return nil, err
		}
		e, err := s.store.GetExp(ctx, id)
		if err != nil {
			return nil, err
		}
		exps = append(exps, e)
	}
	if err := checkAnalysisParams(req.GetKind(), k.params, req.GetParams()); err != nil {
		return nil, err
	}
	params := map[string]string{}
	for k, v := range req.GetParams() {
		params[k] = v
	}
	// The peaks a profile may not carry come from the accelerator each
	// experiment ran on.
	for i, key := range []string{"device_type", "device_type_b"} {
		if i < len(exps) && slices.Contains(k.params, key) && params[key] == "" {
			if dt := deviceTypeOf(exps[i]); dt != "" {
				params[key] = dt
			}
		}
	}
	a := &store.Analysis{ID: ids.New(ids.Analysis), Kind: req.GetKind(), ExpIDs: expIDs, Params: params,
		Creator: p.Display(), CreatorID: p.UserID}
	if err := s.store.CreateAnalysis(ctx, a); err != nil {
		return nil, err
	}
	noteAudit(ctx, a.ID, "kind="+a.Kind+" exps="+strings.Join(expIDs, ","))
	s.changed(changefeed.Change{Kind: "analysis", ID: a.ID, ExpID: expIDs[0]})
	s.log.Info("analysis queued", "analysis", a.ID, "kind", a.Kind, "exp", expIDs[0], "by", p.Display())
	return analysisToAPI(a), nil
}

// deviceTypeOf is the accelerator of an experiment's roles (the first in
// role order that names one).
func deviceTypeOf(e *store.Experiment) string {
	roles := make([]string, 0, len(e.RoleToTaskSpec))
	for r := range e.RoleToTaskSpec {
		roles = append(roles, r)
	}
	slices.Sort(roles)
	for _, r := range roles {
		if dt := e.RoleToTaskSpec[r].DeviceType; dt != "" && dt != "cpu" {
			return dt
		}
	}
	return ""
}

// checkAnalysisParams refuses at create what would fail in the controller.
func checkAnalysisParams(kind string, allowed []string, params map[string]string) error {
	var errs errdefs.FieldErrors
	for k, v := range params {
		field := "params." + k
		switch {
		case !slices.Contains(allowed, k):
			errs.Add(field, "is not an option of %s; allowed: %s", kind, strings.Join(allowed, ", "))
		case k == "rtol" || k == "atol":
			if f, err := strconv.ParseFloat(v, 64); err != nil || f < 0 {
				errs.Add(field, "must be a number of 0 or more, got %q", v)
			}
		case k == "rank":
			if n, err := strconv.Atoi(v); err != nil || n < 0 {
				errs.Add(field, "must be a rank, 0 or more, got %q", v)
			}
		case k == "path":
			if _, err := path.Match(v, ""); err != nil {
				errs.Add(field, "%q is not a glob: %v", v, err)
			}
		}
	}
	return errs.Err()
}

// GetAnalysis returns one analysis.
func (s *Server) GetAnalysis(ctx context.Context, req *falconv1.GetAnalysisRequest) (*falconv1.Analysis, error) {
	if err := checkID("id", ids.Analysis, req.GetId()); err != nil {
		return nil, err
	}
	a, err := s.store.GetAnalysis(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	return analysisToAPI(a), nil
}

// ListAnalyses returns an experiment's analyses, newest first.
func (s *Server) ListAnalyses(ctx context.Context, req *falconv1.ListAnalysesRequest) (*falconv1.ListAnalysesResponse, error) {
	if err := checkID("exp_id", ids.Experiment, req.GetExpId()); err != nil {
		return nil, err
	}
	list, err := s.store.ListAnalyses(ctx, req.GetExpId())
	if err != nil {
		return nil, err
	}
	out := &falconv1.ListAnalysesResponse{}
	for _, a := range list {
		out.Items = append(out.Items, analysisToAPI(a))
	}
	return out, nil
}

// ClaimAnalysis gives the analysis controller the next analysis to run.
func (s *Server) ClaimAnalysis(ctx context.Context, req *falconv1.ClaimAnalysisRequest) (*falconv1.ClaimAnalysisResponse, error) {
	a, err := s.store.ClaimAnalysis(ctx, req.GetWorker(), s.now().Add(-analysisStale))
	if err != nil || a == nil {
		return &falconv1.ClaimAnalysisResponse{}, err
	}
	resp := &falconv1.ClaimAnalysisResponse{Analysis: analysisToAPI(a)}
	for _, id := range a.ExpIDs {
		e, err := s.store.GetExp(ctx, id)
		if err != nil {
			if errdefs.Code(err) == errdefs.Code(errdefs.ErrNotFound) {
				// Deleted since it was queued: the analysis cannot run.
				if _, ferr := s.store.FinishAnalysis(ctx, a.ID, a.Worker, lifecycle.Failed, "experiment "+id+" was deleted", "", ""); ferr != nil {
					return nil, ferr
				}
				return &falconv1.ClaimAnalysisResponse{}, nil
			}
			return nil, err
		}
		resp.ArtifactPaths = append(resp.ArtifactPaths, e.ArtifactPath)
	}
	s.changed(changefeed.Change{Kind: "analysis", ID: a.ID, ExpID: a.ExpIDs[0]})
	return resp, nil
}

// FinishAnalysis records how an analysis ended.
func (s *Server) FinishAnalysis(ctx context.Context, req *falconv1.FinishAnalysisRequest) (*falconv1.Analysis, error) {
	if err := checkID("id", ids.Analysis, req.GetId()); err != nil {
		return nil, err
	}
	a, err := s.store.FinishAnalysis(ctx, req.GetId(), req.GetWorker(), lifecycle.Status(req.GetStatus()), req.GetMessage(), req.GetSummary(), req.GetReportPath())
	if err != nil {
		return nil, err
	}
	s.changed(changefeed.Change{Kind: "analysis", ID: a.ID, ExpID: a.ExpIDs[0]})
	s.log.Info("analysis finished", "analysis", a.ID, "kind", a.Kind, "exp", a.ExpIDs[0], "status", a.Status, "message", a.Message)
	return analysisToAPI(a), nil
}

func analysisToAPI(a *store.Analysis) *falconv1.Analysis {
	return &falconv1.Analysis{
		Id: a.ID, Kind: a.Kind, ExpIds: a.ExpIDs, Params: a.Params, Status: string(a.Status), Message: a.Message,
		Summary: a.Summary, ReportPath: a.ReportPath, Creator: a.Creator, CreatedAt: ts(a.CreatedAt),
		StartedAt: tsp(a.StartedAt), FinishedAt: tsp(a.FinishedAt),
	}
}
