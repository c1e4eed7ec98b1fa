package sqlstore

import (
	"context"
	"strings"
	"unicode/utf8"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
)

const (
	auditInsertCols = "at, actor_id, actor_email, method, target_id, outcome, detail, call_count, source"
	auditCols       = "seq, " + auditInsertCols
	// Limits of the columns: an audit row is cut to fit rather than lost.
	auditShortMax  = 255
	auditDetailMax = 4096
)

// AppendAudit implements store.Store. Values longer than their column are
// cut (at a rune boundary) instead of refused: a record of the call matters
// more than the last bytes of its detail. Only the count of unauthenticated
// calls has no actor.
func (s *Store) AppendAudit(ctx context.Context, e store.AuditEntry) error {
	if (e.ActorID == "" && e.Method != store.AuditUnauthenticated) || e.Method == "" || e.Outcome == "" {
		return errdefs.Invalid("audit", "actor_id, method and outcome are required")
	}
	if e.Count < 0 {
		return errdefs.Invalid("audit", "count must not be negative")
	}
	at := e.At
	if at.IsZero() {
		at = s.now()
	}
	_, err := s.wdb.ExecContext(ctx, insertSQL("audit_log", auditInsertCols),
		s.d.timeArg(at), cut(e.ActorID, auditShortMax), cut(e.ActorEmail, auditShortMax), cut(e.Method, auditShortMax),
		cut(e.TargetID, auditShortMax), cut(e.Outcome, 64), cut(e.Detail, auditDetailMax), max(e.Count, 1), cut(e.Source, auditShortMax))
	if err != nil {
		return dbErr("append audit", err)
	}
	return nil
}

// ListAudit implements store.Store, newest first.
func (s *Store) ListAudit(ctx context.Context, f store.AuditFilter) ([]*store.AuditEntry, string, error) {
	var c conds
	c.eq("target_id", f.TargetID)
	c.eq("actor_id", f.ActorID)
	// No index serves these two alone; the log is read by admins now and
	// then, and a scan of it is cheap next to the writes it records.
	if f.Actor != "" {
		// Emails are stored lower-case (auth lower-cases them).
		c.add("(actor_email = ? OR actor_id = ?)", strings.ToLower(f.Actor), f.Actor)
	}
	c.eq("method", f.Method)
	return listPage(ctx, s.reads, "audit_log", auditCols, c, f.Page, true, func(sc scanner) (*store.AuditEntry, int64, error) {
		var e store.AuditEntry
		err := sc.Scan(&e.Seq, timeCol{&e.At}, &e.ActorID, &e.ActorEmail, &e.Method, &e.TargetID, &e.Outcome, &e.Detail, &e.Count, &e.Source)
		return &e, e.Seq, err
	})
}

// cut shortens s to at most n bytes without splitting a rune.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
