package store

import (
	"time"

	"github.com/falconhq/falcon/internal/lifecycle"
)

// Event kinds: what an event is about.
const (
	EventExperiment = "experiment"
	EventJob        = "job"
)

// MaxEventsPerExp is how many events the store keeps per experiment; older
// ones are dropped as new ones come. An experiment's life is a few dozen
// changes (each job's Pending reasons, Running, its end, the experiment's
// own moves), but a job waiting in a busy queue gets a new Message each
// time its position moves, and an interactive experiment adds TTL warnings,
// extensions and exec sessions. 1000 keeps the whole history of all but a
// pathological experiment, while bounding what one can hold (at most 1000
// rows of at most MaxEventMessage bytes) whatever it does.
const MaxEventsPerExp = 1000

// MaxEventMessage bounds an event's Message; a longer one is cut (the
// entity itself keeps all of it).
const MaxEventMessage = 4096

// Event is one change of an experiment or of one of its jobs, as a watcher
// sees it: what the entity's status, reason and message became, with a few
// details the change carried (a job's role, its node pool, the time left of
// a TTL). Events of an experiment are numbered 1, 2, 3... in the order they
// were written, so a watcher resumes after the last Seq it saw.
type Event struct {
	Seq      int64     // set by the store
	Time     time.Time // zero: the store's now
	ExpID    string
	Kind     string // EventExperiment or EventJob
	EntityID string // the experiment's ID or the job's
	Status   lifecycle.Status
	Reason   string
	Message  string
	// Detail is small and free-form: "role", "node_pool", "cluster",
	// "ttl_left"... Keys are lower_snake_case, values short.
	Detail map[string]string
}

// EventFilter selects one experiment's events, oldest first.
type EventFilter struct {
	ExpID string
	// AfterSeq skips the events up to this one (0: from the first kept).
	AfterSeq int64
	Limit    int // at most 1000; 0 means 1000
}

// EventRef names one event: the experiment it is about, its number, and
// when it was written.
type EventRef struct {
	ExpID string
	Seq   int64
	Time  time.Time
}
