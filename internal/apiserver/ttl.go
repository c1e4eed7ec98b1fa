package apiserver

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/store"
)

// HoldCommand is what the ranks of an interactive experiment without a
// command run: nothing, until they are stopped. It answers SIGTERM at
// once, which `sleep infinity` as a container's first process would not
// (the kernel ignores signals a PID 1 has no handler for), so an abort or
// an expiry does not wait out the grace period.
const HoldCommand = "trap 'exit 0' TERM INT; while :; do sleep 3600 & wait $!; done"

// WithMaxTTL caps the ttl of experiments and of extends (0: no cap).
func WithMaxTTL(d time.Duration) Option { return func(s *Server) { s.maxTTL = d } }

// checkTTL applies the server's cap to a ttl the user asked for; field
// names where they wrote it.
func (s *Server) checkTTL(field string, d time.Duration) error {
	if s.maxTTL > 0 && d > s.maxTTL {
		return errdefs.Invalid(field, "%s is over this server's limit of %s (falcon server --max-ttl)", shortDuration(d), shortDuration(s.maxTTL))
	}
	return nil
}

// ExtendExp sets the time an experiment has left to req.ttl from now.
func (s *Server) ExtendExp(ctx context.Context, req *falconv1.ExtendExpRequest) (*falconv1.Experiment, error) {
	p, err := s.principal(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkID("id", ids.Experiment, req.GetId()); err != nil {
		return nil, err
	}
	if req.Ttl == nil {
		return nil, errdefs.Invalid("ttl", "is required: the time the experiment has left from now, e.g. 1h")
	}
	d := req.GetTtl().AsDuration()
	if err := req.GetTtl().CheckValid(); err != nil || d <= 0 {
		return nil, errdefs.Invalid("ttl", "must be a positive duration such as 1h or 30m, got %s", d)
	}
	if err := s.checkTTL("ttl", d); err != nil {
		return nil, err
	}
	if err := s.mayChange(ctx, p, req.GetId(), "extend"); err != nil {
		return nil, err
	}
	now := s.now()
	exp, err := s.store.ExtendExp(ctx, req.GetId(), now.Add(d), d)
	if err != nil {
		return nil, err
	}
	noteAudit(ctx, "", "ttl="+shortDuration(d))
	s.ttlEvent(ctx, exp, "ttl extended by "+p.Display(), d)
	s.changed(expChange(exp.ID))
	if at, ok := exp.Expiry(); ok {
		s.log.Info("experiment extended", "exp", exp.ID, "by", p.Display(), "expires_at", at)
	} else {
		s.log.Info("experiment extended", "exp", exp.ID, "by", p.Display(), "ttl", d)
	}
	return s.getExp(ctx, exp.ID)
}

// EnforceTTL ends an experiment whose ttl or idle_ttl has passed and warns
// of one about to, by the server's clock. The expController calls it for
// experiments it sees near their end; calling it early, late or twice
// does no harm: an abort is idempotent, and the warning is recorded once
// per expiry in the store.
func (s *Server) EnforceTTL(ctx context.Context, req *falconv1.EnforceTTLRequest) (*falconv1.EnforceTTLResponse, error) {
	if err := checkID("id", ids.Experiment, req.GetId()); err != nil {
		return nil, err
	}
	exp, err := s.store.GetExp(ctx, req.GetId())
	if err != nil {
		return nil, err
	}
	action, msg := "", ""
	if !lifecycle.ExperimentMachine.IsTerminal(exp.Status) && exp.Status != lifecycle.Aborting {
		now := s.now()
		expiry, hasTTL := exp.Expiry()
		switch {
		case hasTTL && !now.Before(expiry):
			action, msg = "expired", ttlExpiredMessage(exp, expiry)
		case exp.IdleTTL > 0 && exp.StartedAt != nil:
			last := s.lastActivity(ctx, exp)
			if now.Sub(last) >= exp.IdleTTL {
				seen := "no exec session and no output"
				if s.logDir == "" {
					// Pods' output is not read for idle_ttl yet: only
					// sessions count on Kubernetes and GKE (README).
					seen = "no exec session"
				}
				action, msg = "idle", fmt.Sprintf("idle_ttl of %s expired: %s since %s", shortDuration(exp.IdleTTL), seen, last.UTC().Format(time.RFC3339))
			} else if exp.ActiveAt == nil || last.After(*exp.ActiveAt) {
				// Recorded, so the expController sees the activity and
				// does not ask again until the new idle time is up.
				if err := s.store.TouchExpActivity(ctx, exp.ID, last); err != nil {
					return nil, err
				}
			}
		}
		if action == "" && hasTTL && expiry.Sub(now) <= lifecycle.TTLWarning {
			first, err := s.store.MarkTTLWarned(ctx, exp.ID, expiry)
			if err != nil {
				return nil, err
			}
			if first {
				action = "warned"
				s.ttlEvent(ctx, exp, fmt.Sprintf("ttl ends in %s; falcon exp extend %s --ttl 1h for more", timeLeft(expiry.Sub(now)), exp.ID), expiry.Sub(now))
				s.log.Info("experiment ttl ends soon", "exp", exp.ID, "expires_at", expiry, "left", expiry.Sub(now).Round(time.Second))
				s.changed(expChange(exp.ID))
			}
		}
		if msg != "" {
			if _, changed, err := s.store.AbortExp(ctx, exp.ID, msg); err != nil {
				return nil, err
			} else if changed {
				s.changed(expChange(exp.ID))
				s.log.Info("experiment stopped", "exp", exp.ID, "why", msg)
			}
		}
	}
	x, err := s.getExp(ctx, exp.ID)
	if err != nil {
		return nil, err
	}
	return &falconv1.EnforceTTLResponse{Action: action, Experiment: x}, nil
}

// ttlEvent records a change of an experiment's time left in its events,
// for watchers (falcon exp events, exp wait). A failed write is logged: the
// change itself has happened.
func (s *Server) ttlEvent(ctx context.Context, e *store.Experiment, msg string, left time.Duration) {
	detail := map[string]string{"ttl_left": shortDuration(left.Round(time.Second))}
	if at, ok := e.Expiry(); ok {
		detail["expires_at"] = at.UTC().Format(time.RFC3339)
	}
	if err := s.store.AppendEvents(ctx, []store.Event{{
		ExpID: e.ID, Kind: store.EventExperiment, EntityID: e.ID, Status: e.Status, Reason: e.Reason, Message: msg, Detail: detail,
	}}); err != nil {
		s.log.Warn("record ttl event", "exp", e.ID, "err", err)
	}
}

// ttlExpiredMessage is the Message an expired experiment ends with.
func ttlExpiredMessage(e *store.Experiment, expiry time.Time) string {
	if e.ExpiresAt != nil {
		return fmt.Sprintf("ttl expired at %s (as last extended)", expiry.UTC().Format(time.RFC3339))
	}
	return fmt.Sprintf("ttl of %s expired", shortDuration(e.TTL))
}

// lastActivity is when the experiment was last active: it started, an exec
// session was open (ActiveAt), or, on falcon dev, a rank wrote output.
func (s *Server) lastActivity(ctx context.Context, e *store.Experiment) time.Time {
	last := *e.StartedAt
	if e.ActiveAt != nil && e.ActiveAt.After(last) {
		last = *e.ActiveAt
	}
	if s.logDir != "" {
		// Local ranks write <logDir>/<job_id>/<pod>.log; a file's
		// modification time is its last output.
		jobs, err := s.allJobs(ctx, store.JobFilter{ExpID: e.ID})
		if err == nil {
			for _, j := range jobs {
				entries, _ := os.ReadDir(filepath.Join(s.logDir, j.ID))
				for _, de := range entries {
					if fi, err := de.Info(); err == nil && fi.ModTime().After(last) {
						last = fi.ModTime()
					}
				}
			}
		}
	}
	return last
}

// timeLeft says how long is left, for a message: to the minute from a
// minute on, else to the second, and never "0s" while time is left (a
// 30s ttl, warned of as it started, was said to end "in 0s").
func timeLeft(d time.Duration) string {
	if d >= time.Minute {
		return shortDuration(d.Round(time.Minute))
	}
	return shortDuration(max(d.Round(time.Second), time.Second))
}

// shortDuration writes 2h for 2h0m0s and 1h30m for 1h30m0s.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// ttlToAPI fills the experiment's ttl fields.
func ttlToAPI(x *falconv1.Experiment, e *store.Experiment) {
	if e.TTL > 0 {
		x.Ttl = durationpb.New(e.TTL)
	}
	if e.IdleTTL > 0 {
		x.IdleTtl = durationpb.New(e.IdleTTL)
	}
	x.Interactive = e.Interactive
	if at, ok := e.Expiry(); ok {
		x.ExpiresAt = ts(at)
	}
	x.ActiveAt = tsp(e.ActiveAt)
}
