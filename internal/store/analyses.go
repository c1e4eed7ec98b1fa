package store

import (
	"time"

	"github.com/falconhq/falcon/internal/lifecycle"
)

// Analysis is a queued or finished analysis of experiments' artifacts.
type Analysis struct {
	ID         string
	Kind       string
	ExpIDs     []string
	Params     map[string]string
	Status     lifecycle.Status
	Message    string
	Summary    string // JSON, at most MaxAnalysisSummary bytes
	ReportPath string
	Creator    string
	CreatorID  string
	Worker     string
	CreatedAt  time.Time
	UpdatedAt  time.Time
	ClaimedAt  *time.Time
	StartedAt  *time.Time
	FinishedAt *time.Time
}

// MaxAnalysisSummary bounds what an analysis keeps in the database: the
// full result lives in its report files.
const MaxAnalysisSummary = 64 << 10
