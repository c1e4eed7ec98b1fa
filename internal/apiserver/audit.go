package apiserver

import (
	"context"
	"errors"
	"slices"
	"strings"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/store"
)

// ListAuditEvents lists the audit log, newest first, one page at a time.
// The access rules keep it to admins.
func (s *Server) ListAuditEvents(ctx context.Context, req *falconv1.ListAuditEventsRequest) (*falconv1.ListAuditEventsResponse, error) {
	var errs errdefs.FieldErrors
	size, err := pageSize(req.GetPageSize())
	if err := collect(&errs, err); err != nil {
		return nil, err
	}
	if id := req.GetExpId(); id != "" && !ids.Valid(ids.Experiment, id) {
		errs.Add("exp_id", "%q is not an experiment ID (%s followed by ten characters of [a-z0-9])", id, ids.Experiment)
	}
	method, err := auditedMethod(req.GetMethod())
	if err := collect(&errs, err); err != nil {
		return nil, err
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}
	items, next, err := s.store.ListAudit(ctx, store.AuditFilter{
		Page:     store.Page{Size: size, Token: req.GetPageToken()},
		TargetID: req.GetExpId(), Actor: strings.TrimSpace(req.GetActor()), Method: method,
	})
	if err != nil {
		return nil, err
	}
	resp := &falconv1.ListAuditEventsResponse{NextPageToken: next, Items: make([]*falconv1.AuditEvent, 0, len(items))}
	for _, e := range items {
		resp.Items = append(resp.Items, &falconv1.AuditEvent{
			At: ts(e.At), ActorId: e.ActorID, ActorEmail: e.ActorEmail, Method: e.Method,
			TargetId: e.TargetID, Outcome: e.Outcome, Detail: e.Detail, Count: e.Count, Source: e.Source,
		})
	}
	return resp, nil
}

// collect adds a field error to errs, so that every bad field is reported
// at once, and returns any other error.
func collect(errs *errdefs.FieldErrors, err error) error {
	var fe *errdefs.FieldError
	if errors.As(err, &fe) {
		*errs = append(*errs, fe)
		return nil
	}
	return err
}

// auditedMethod resolves a method filter, by name (AbortExp, any case) or
// full name, to the full name the log stores. Only audited methods appear
// in the log, and the counts of calls refused before authentication under
// "unauthenticated", so naming another is a mistake worth reporting.
func auditedMethod(m string) (string, error) {
	if m == "" {
		return "", nil
	}
	if strings.EqualFold(m, store.AuditUnauthenticated) {
		return store.AuditUnauthenticated, nil
	}
	names := []string{store.AuditUnauthenticated}
	for full, r := range rules {
		if r.audit == nil {
			continue
		}
		if full == m || strings.EqualFold(shortMethod(full), m) {
			return full, nil
		}
		names = append(names, shortMethod(full))
	}
	slices.Sort(names)
	return "", errdefs.Invalid("method", "%q is not an audited method; allowed: %s", m, strings.Join(names, ", "))
}
