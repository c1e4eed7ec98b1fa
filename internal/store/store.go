package store

import (
	"context"
	"fmt"
	"time"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
)

// TaskSpec is what one role of an experiment runs. It is stored as JSON, so
// the json tags are the stored (and manifest) field names.
type TaskSpec struct {
	Command        string            `json:"command"`
	Replica        int32             `json:"replica"`
	Image          string            `json:"image,omitempty"`
	DeviceCount    int32             `json:"device_count,omitempty"`
	DeviceType     string            `json:"device_type,omitempty"`
	DeviceTopo     string            `json:"device_topo,omitempty"`
	Envs           map[string]string `json:"envs,omitempty"`
	TimeoutSeconds int64             `json:"timeout_seconds,omitempty"`
	SupplyMode     string            `json:"supply_mode,omitempty"`
	// Slices is how many slices of DeviceTopo the task runs on together
	// (JAX multislice); 0 is one.
	Slices int32 `json:"slices,omitempty"`
	// Resources is nil when the task gives none, so rows written before the
	// field existed and rows without resources read and write the same.
	Resources *Resources `json:"resources,omitempty"`
}

// Ranks is how many hosts the task runs on over all its slices (replica
// per slice); rank r is host r%Replica of slice r/Replica.
func (t TaskSpec) Ranks() int32 { return t.Replica * max(t.Slices, 1) }

// Resources are a task's requests and limits: resource name (cpu, memory,
// ephemeral-storage) to a Kubernetes quantity, kept as the user wrote it.
type Resources struct {
	Requests map[string]string `json:"requests,omitempty"`
	Limits   map[string]string `json:"limits,omitempty"`
}

// Experiment is a user's request to run one or more roles, and its status.
type Experiment struct {
	ID             string
	Name           string
	ExpType        string
	ClusterName    string
	Priority       int32
	Tags           []string
	Config         string
	RoleToTaskSpec map[string]TaskSpec
	Status         lifecycle.Status
	Reason         string
	Message        string
	Creator        string // email of the creating user
	CreatorID      string // user_id of the creating user
	ArtifactPath   string
	Version        int64 // incremented by every update
	CreatedAt      time.Time
	UpdatedAt      time.Time
	StartedAt      *time.Time // first move to Running
	FinishedAt     *time.Time // move to a terminal status
	AbortingAt     *time.Time
	AbortedAt      *time.Time
	// Metrics are the manifest's log patterns for rank 0's log.
	Metrics []MetricSpec
	// TTL, counted from StartedAt, ends the experiment (0: none); IdleTTL
	// ends it after that long without activity (0: none). Interactive
	// experiments hold their slice for exec until the TTL.
	TTL         time.Duration
	IdleTTL     time.Duration
	Interactive bool
	// ExpiresAt is set by an extend; until then the experiment expires at
	// StartedAt + TTL (see Expiry).
	ExpiresAt *time.Time
	// ActiveAt is the last exec session or output IdleTTL counts from.
	ActiveAt *time.Time
	// TTLWarnedFor is the expiry the warning before it was given for.
	TTLWarnedFor *time.Time
}

// Expiry is when the experiment's TTL ends: what an extend set, else
// StartedAt + TTL; false when it has no TTL or has not run yet.
func (e *Experiment) Expiry() (time.Time, bool) {
	if e.ExpiresAt != nil {
		return *e.ExpiresAt, true
	}
	if e.TTL > 0 && e.StartedAt != nil {
		return e.StartedAt.Add(e.TTL), true
	}
	return time.Time{}, false
}

// ExpChange is what UpdateJobStatuses did to the experiment of a job it
// wrote: the status it had before and has after, with its Reason after;
// whether the write changed it; and whether the write left it settled: in
// line with its jobs with nothing for the expController to do (no other
// role to stop, no time-to-live to watch).
type ExpChange struct {
	ID, Name, ClusterName string
	From, Status          lifecycle.Status
	Reason                string
	Changed, Settled      bool
}

// Job is one role of an experiment: what the resource manager schedules.
type Job struct {
	ID           string
	ExpID        string
	ExpName      string
	Role         string
	ClusterName  string
	ExpType      string
	Priority     int32
	TaskSpec     TaskSpec
	Status       lifecycle.Status
	Reason       string
	Message      string
	Creator      string
	ArtifactID   string
	ArtifactPath string
	Version      int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
	StartedAt    *time.Time
	FinishedAt   *time.Time
	AbortingAt   *time.Time
	AbortedAt    *time.Time
	// DispatchedAt is when the job left its queue to acquire resources
	// (first Reason Provisioning or Dispatching): its timeout for
	// acquiring counts from here, across controller restarts.
	DispatchedAt *time.Time
	// NodePool is the GKE node pool the job runs on; a pool belongs to
	// whichever live job names it.
	NodePool string
	// Selection is the decision record of the job's placement as the API
	// serves it (protojson of a ClusterSelection), written with the pick;
	// "" when none was kept. The store keeps it opaque.
	Selection string
}

// Artifact is where an experiment's outputs are kept; the files themselves
// never enter the database.
type Artifact struct {
	ID           string
	ExpID        string
	Path         string
	ArtifactType string
	Status       lifecycle.Status
	Reason       string
	Message      string
	Version      int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// Index is what the index of its files holds; the store alone writes
	// it (SyncArtifactFiles).
	Index ArtifactIndex
}

// ArtifactIndex sums up an artifact's file index.
type ArtifactIndex struct {
	Files, Bytes int64
	// Complete: refreshed after the experiment ended, so it lists every
	// file the job wrote.
	Complete bool
	At       *time.Time
}

// ArtifactFile is one file of an artifact, by its path relative to it.
type ArtifactFile struct {
	Path     string
	Size     int64
	Checksum string
	Updated  time.Time
}

// ArtifactFileFilter selects files of one artifact, in path (byte) order.
type ArtifactFileFilter struct {
	ArtifactID string
	Prefix     string
	// Hidden also lists the files under .falcon/.
	Hidden bool
	// After continues past this path (the last one of the previous page).
	After string
	Limit int // at most 1000; 0 means 1000
}

// MetricSpec is a metric the experiment's rank-0 log reports, by pattern.
type MetricSpec struct {
	Name    string `json:"name"`
	Pattern string `json:"pattern"`
	Better  string `json:"better,omitempty"`
}

// MetricPoint is one extracted value. Ord numbers the points of one
// (experiment, name, source) in the order they were read, which makes
// re-reading a source idempotent.
type MetricPoint struct {
	Name   string
	Source string // "file" or "log"
	Ord    int64
	Step   int64
	Value  float64
}

// MetricCursor is how far one source of an experiment's metrics was read:
// an opaque document of the extractor's, the lines it skipped, and whether
// the source is finished (read after the experiment ended).
type MetricCursor struct {
	Source  string
	Doc     string
	Skipped int64
	Done    bool
}

// Cluster states.
const (
	ClusterActive      = "active"
	ClusterMaintenance = "maintenance"
	ClusterOffline     = "offline"
)

// SettingSelection names the registry setting that holds its selection
// policy ("spread" or "priority", see package queue); unset is spread.
const SettingSelection = "selection"

// Cluster is a place jobs run: an edge GKE cluster, any Kubernetes cluster,
// or the local machine.
type Cluster struct {
	ID                 string
	Name               string
	Backend            string // "local", "kubernetes" or "gke"
	Project            string
	Location           string
	AcceleratorTypes   []string // what it offers, most preferred first; empty offers anything (local)
	GCSBucket          string
	DefaultReservation string
	Status             string
	CreatedAt          time.Time
	// Spec holds how to reach and use the cluster. It is stored as one JSON
	// document because it grows with every backend, and nothing queries
	// inside it.
	Spec ClusterSpec
}

// ClusterSpec is the backend-specific part of a cluster's registration.
type ClusterSpec struct {
	Namespace     string            `json:"namespace,omitempty"`
	Kubeconfig    string            `json:"kubeconfig,omitempty"`   // path on the controller's machine (kubernetes backend)
	KubeContext   string            `json:"kube_context,omitempty"` // context in that kubeconfig
	GKECluster    string            `json:"gke_cluster,omitempty"`  // GKE cluster name (gke backend)
	MaxQueueDepth int               `json:"max_queue_depth,omitempty"`
	Accelerators  []AcceleratorSlot `json:"accelerators,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	// ServiceAccount is the Kubernetes service account job pods run as;
	// empty is the namespace's default.
	ServiceAccount string `json:"service_account,omitempty"`
	// XpkPath is the xpk executable (xpk backend); empty is xpk on PATH.
	XpkPath string `json:"xpk_path,omitempty"`
	// ProbeTimeoutS bounds one health probe, in seconds; 0 is the default.
	ProbeTimeoutS int `json:"probe_timeout_s,omitempty"`
	// ExtraArgs are appended to every xpk workload create (xpk backend).
	ExtraArgs []string `json:"extra_args,omitempty"`
}

// AcceleratorSlot is one accelerator type a cluster offers; a lower
// priority is preferred when several clusters could take a job.
type AcceleratorSlot struct {
	Type     string `json:"type"`
	Priority int    `json:"priority"`
	// DeviceClass is "tpu" or "gpu" when the registry gave one.
	DeviceClass string `json:"device_class,omitempty"`
}

// ClusterProbe is the last health probe of a cluster. QueueDepth and
// RunningCount are nil when it could not be reached.
type ClusterProbe struct {
	Cluster      string
	Reachable    bool
	QueueDepth   *int
	RunningCount *int
	Error        string
	ProbedAt     time.Time
}

// User is a person or service principal, registered on first request.
type User struct {
	UserID    string
	Email     string
	CreatedAt time.Time
}

// AuditEntry is one mutating call: who made it, what it was, on which
// entity, when, and how it ended. An entry of Method AuditUnauthenticated
// instead counts the calls refused before authentication from one source
// for one reason in one minute (see apiserver's refusal log).
type AuditEntry struct {
	Seq        int64 // set by the store; higher is later
	At         time.Time
	ActorID    string // the principal's user_id; empty for AuditUnauthenticated
	ActorEmail string // empty for service principals
	Method     string // the full gRPC method, e.g. /falcon.v1.ExperimentService/AbortExp
	TargetID   string // the experiment or cluster acted on, when there is one
	Outcome    string // "ok", or the gRPC code of the refusal or failure
	Detail     string
	// Count is how many calls the entry stands for: 1 for a call (0 is
	// stored as 1), more for AuditUnauthenticated.
	Count int64
	// Source is where the call came from (a client address), when known.
	Source string
}

// AuditOK is the Outcome of a call that succeeded.
const AuditOK = "ok"

// AuditUnauthenticated is the Method of the entries that count calls
// refused before authentication: no caller is known, so there is no
// actor, and a flood of them must not add a row per call.
const AuditUnauthenticated = "unauthenticated"

// UserRelink is what RelinkUser did.
type UserRelink struct {
	User       *User  // the user as now registered
	PreviousID string // the user_id before; User.UserID when nothing changed
	// Experiments is how many experiments moved to the new user_id.
	Experiments int64
}

// Changed reports whether the user moved to another user_id.
func (r *UserRelink) Changed() bool { return r.PreviousID != r.User.UserID }

// UserIDTakenError is RelinkUser's refusal of a user_id that another user
// has: one identity is one user.
type UserIDTakenError struct {
	UserID string
	// Holder is the other user's email, or its user_id when it has none
	// (a service principal); empty when the database did not say.
	Holder string
}

func (e *UserIDTakenError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("user_id %q is already registered to another user", e.UserID)
	}
	return fmt.Sprintf("user_id %q is already registered to %s", e.UserID, e.Holder)
}

// Unwrap makes it an errdefs.ErrAlreadyExists.
func (e *UserIDTakenError) Unwrap() error { return errdefs.ErrAlreadyExists }

// AuditFilter selects audit entries; empty fields match everything.
// Newest first.
type AuditFilter struct {
	Page
	TargetID string
	ActorID  string
	// Actor is the caller's email, in any case, or user_id (all a service
	// token has).
	Actor  string
	Method string // the full gRPC method
}

// StatusUpdate moves one entity to Status with Reason and Message, provided
// it is still in Expected. Expected is required: there is no blind update.
type StatusUpdate struct {
	ID       string
	Expected lifecycle.Status
	Status   lifecycle.Status
	Reason   string
	Message  string
	// ClusterName, for jobs only: the cluster the job was dispatched to
	// (empty leaves it unchanged).
	ClusterName string
	// NodePool, for jobs only: the node pool assigned to the job (empty
	// leaves it unchanged).
	NodePool string
	// Selection, for jobs only: the decision record of its placement
	// (see Job.Selection; empty leaves it unchanged).
	Selection string
	// FinishedAt, with an ending status of an experiment or a job only,
	// is when it ended as its source saw it (a Kubernetes Job's
	// completion, a process's exit), which is earlier than the write when
	// the controller saw the end late (it was down). The row's finished_at
	// becomes it, bounded by the row's start (or creation) and the store's
	// clock; nil is the time of the write.
	FinishedAt *time.Time
	// StartedAt, with status Running of an experiment or a job only, is
	// when it began to run as its source saw it (a container's start),
	// for the same reason. The row keeps a started_at it has; a new one
	// is bounded by the row's creation and the store's clock; nil is the
	// time of the write.
	StartedAt *time.Time
}

// Page asks for one page of a list. PageToken is opaque: the NextPageToken
// of the previous page, empty for the first.
type Page struct {
	Size  int // 0 means the default (50); capped at 1000
	Token string
}

// ExpFilter selects experiments; empty fields match everything. Newest first.
type ExpFilter struct {
	Page
	ClusterName string
	Status      lifecycle.Status
	ExpType     string
	Creator     string
	// CreatorID: only experiments of this user ID (creator_id).
	CreatorID string
	// Name is an exact name, or a prefix when NamePrefix is set.
	Name       string
	NamePrefix bool
	// Tags: only experiments carrying every one.
	Tags []string
	// IDs: only these experiments.
	IDs []string
}

// JobFilter selects jobs; empty fields match everything. Oldest first, so a
// controller sees jobs in submission order.
type JobFilter struct {
	Page
	ExpID       string
	ExpIDs      []string // any of these experiments
	Statuses    []lifecycle.Status
	ClusterName string
	// CreatedSince keeps the jobs created at or after it (zero: all).
	CreatedSince time.Time
}

// ArtifactFilter selects artifacts. Oldest first.
type ArtifactFilter struct {
	Page
	ExpID    string
	ExpIDs   []string // any of these experiments
	Statuses []lifecycle.Status
}

// Store is the repository every Falcon backend implements. All methods are
// safe for concurrent use. Errors are errdefs kinds.
type Store interface {
	// CreateExp writes exp, its jobs and its artifact in one transaction.
	// Their IDs, statuses and timestamps are set by the caller. A duplicate
	// experiment name is ErrAlreadyExists.
	CreateExp(ctx context.Context, exp *Experiment, jobs []*Job, art *Artifact) error
	GetExp(ctx context.Context, id string) (*Experiment, error)
	// ExpNameTaken reports the ID of the experiment named name, or "" when
	// the name is free (what `exp validate` checks before a create would).
	ExpNameTaken(ctx context.Context, name string) (id string, err error)
	ListExps(ctx context.Context, f ExpFilter) (items []*Experiment, next string, err error)
	// AbortExp moves the experiment and its Pending/Running jobs to Aborting,
	// setting aborting_at and message, in one transaction. changed is false
	// (and nothing is written) when the experiment is already terminal or
	// Aborting.
	AbortExp(ctx context.Context, id, message string) (exp *Experiment, changed bool, err error)
	// ForceAbortExp moves the experiment and its non-terminal jobs
	// (Aborting ones included) straight to Aborted, in one transaction,
	// without the controllers stopping anything: for a cluster that will
	// never confirm the stop. The rows pass through Aborting as the
	// lifecycle tables require (aborting_at is kept or set, then
	// aborted_at and finished_at). The experiment gets message, its jobs
	// jobMessage. changed is false (and nothing is written) when the
	// experiment is already terminal.
	ForceAbortExp(ctx context.Context, id, message, jobMessage string) (exp *Experiment, changed bool, err error)
	// DeleteExp removes the experiment, its jobs and its artifact in one
	// transaction, only when the experiment is terminal
	// (ErrFailedPrecondition otherwise).
	DeleteExp(ctx context.Context, id string) error
	UpdateExpStatus(ctx context.Context, u StatusUpdate) (*Experiment, error)
	// UpdateExpStatuses applies many updates in one transaction, in order,
	// each under its own precondition (a later update of an experiment
	// sees an earlier one's write): errs[i] is update i's refusal and
	// exps[i] its row otherwise. err is set, and nothing written, only
	// when the database fails.
	UpdateExpStatuses(ctx context.Context, us []StatusUpdate) (exps []*Experiment, errs []error, err error)
	// ExtendExp makes a running experiment expire at at, or gives one that
	// has not run yet the TTL ttl; FailedPrecondition once it is ending.
	ExtendExp(ctx context.Context, id string, at time.Time, ttl time.Duration) (*Experiment, error)
	// MarkTTLWarned records the warning before expiry; true for the call
	// that recorded it.
	MarkTTLWarned(ctx context.Context, id string, expiry time.Time) (bool, error)
	// TouchExpActivity moves the experiment's last activity forward to at.
	TouchExpActivity(ctx context.Context, id string, at time.Time) error

	// CreateAnalysis queues a, Pending, indexed by each of its experiments.
	CreateAnalysis(ctx context.Context, a *Analysis) error
	GetAnalysis(ctx context.Context, id string) (*Analysis, error)
	// ListAnalyses returns an experiment's analyses, newest first.
	ListAnalyses(ctx context.Context, expID string) ([]*Analysis, error)
	// ClaimAnalysis makes the oldest Pending analysis, or a Running one
	// claimed before staleBefore, Running for worker; nil when none.
	ClaimAnalysis(ctx context.Context, worker string, staleBefore time.Time) (*Analysis, error)
	// FinishAnalysis ends a Running analysis Succeeded or Failed, if
	// worker (when not empty) still holds it.
	FinishAnalysis(ctx context.Context, id, worker string, status lifecycle.Status, message, summary, reportPath string) (*Analysis, error)

	GetJob(ctx context.Context, id string) (*Job, error)
	ListJobs(ctx context.Context, f JobFilter) (items []*Job, next string, err error)
	UpdateJobStatus(ctx context.Context, u StatusUpdate) (*Job, error)
	// UpdateJobStatuses applies many updates in one transaction, each
	// under its own precondition: errs[i] is update i's refusal (invalid,
	// not found, failed precondition) and jobs[i] its row otherwise. err is
	// set, and nothing written, only when the database fails.
	//
	// In the same transaction each experiment of a job whose status moved
	// is brought in line with its jobs, its artifact first
	// (lifecycle.Propagate, all but sibling aborts, which stay the
	// expController's): exps says, for each such experiment, once, what
	// the write did to it. A new Reason or Message within a status (a
	// queue position) leaves its experiment to the expController.
	// UpdateJobStatus does not do this; it is for writers whose
	// experiment follows by other means.
	UpdateJobStatuses(ctx context.Context, us []StatusUpdate) (jobs []*Job, errs []error, exps []ExpChange, err error)
	// AppendJobMessage adds note to the job's Message ("message; note")
	// whatever its status, changing nothing else but version and
	// updated_at. It is how an outcome learns of a later cleanup failure.
	AppendJobMessage(ctx context.Context, id, note string) (*Job, error)

	GetArtifact(ctx context.Context, id string) (*Artifact, error)
	ListArtifacts(ctx context.Context, f ArtifactFilter) (items []*Artifact, next string, err error)
	UpdateArtifactStatus(ctx context.Context, u StatusUpdate) (*Artifact, error)
	// UpdateArtifactStatuses is UpdateExpStatuses for artifacts: many
	// updates in one transaction, in order, each under its own
	// precondition; errs[i] is update i's refusal, arts[i] its row
	// otherwise, and err is set (nothing written) only when the database
	// fails.
	UpdateArtifactStatuses(ctx context.Context, us []StatusUpdate) (arts []*Artifact, errs []error, err error)
	// SyncArtifactFiles brings the artifact's file index up to date in one
	// transaction: upsert writes or replaces rows, remove deletes paths,
	// and the artifact's Index becomes idx (its At included).
	SyncArtifactFiles(ctx context.Context, artifactID string, upsert []ArtifactFile, remove []string, idx ArtifactIndex) error
	// ListArtifactFiles pages through the index; next is "" on the last page.
	ListArtifactFiles(ctx context.Context, f ArtifactFileFilter) (items []ArtifactFile, next string, err error)

	// AppendMetrics adds points read from one source and moves its cursor,
	// in one transaction; a point already stored (same name, source and
	// ord) is kept as it is.
	AppendMetrics(ctx context.Context, expID string, cur MetricCursor, points []MetricPoint) error
	// MetricCursors returns every source's cursor of the experiment.
	MetricCursors(ctx context.Context, expID string) ([]MetricCursor, error)
	// ListMetricPoints returns the experiment's points, of the named
	// metrics only when names is not empty, by name, source and ord.
	ListMetricPoints(ctx context.Context, expID string, names []string) ([]MetricPoint, error)

	// UpsertCluster creates the cluster or, when one with the same name
	// exists, updates it in place (keeping its ID and created_at).
	UpsertCluster(ctx context.Context, c *Cluster) (*Cluster, error)
	// GetCluster finds a cluster by name or by ID.
	GetCluster(ctx context.Context, nameOrID string) (*Cluster, error)
	ListClusters(ctx context.Context) ([]*Cluster, error)
	// DeleteCluster removes the cluster named name. It refuses with
	// ErrFailedPrecondition while a job that is not terminal names the
	// cluster, since that job's executor still needs to reach it.
	DeleteCluster(ctx context.Context, name string) error
	// PutClusterReport replaces the controller's latest view of a cluster
	// (an opaque document) and when it was taken.
	PutClusterReport(ctx context.Context, name string, report []byte, at time.Time) error
	// GetClusterReport returns it; ErrNotFound when none was reported.
	GetClusterReport(ctx context.Context, name string) (report []byte, at time.Time, err error)
	// PutClusterProbes replaces the last probe of each cluster named in
	// probes, in one transaction. A probe of a cluster that is not
	// registered (deleted while it was probed) is dropped.
	PutClusterProbes(ctx context.Context, probes []ClusterProbe) error
	// ListClusterProbes returns the last probe of every probed cluster, by
	// cluster name.
	ListClusterProbes(ctx context.Context) ([]ClusterProbe, error)
	// RegistrySetting returns a setting of the registry as a whole (see
	// SettingSelection); "" when it was never set.
	RegistrySetting(ctx context.Context, name string) (string, error)
	// PutRegistrySetting sets it; "" removes it (the default again).
	PutRegistrySetting(ctx context.Context, name, value string) error

	// EnsureUser inserts the user if no row has its user_id, and returns the
	// stored row. Concurrent first calls for one user create one row.
	EnsureUser(ctx context.Context, u *User) (*User, error)
	ListUsers(ctx context.Context) ([]*User, error)
	// RelinkUser moves the user registered with email to the user_id
	// newID, with everything that names the old user_id as its owner
	// (experiments' creator_id), in one transaction. The audit log is
	// history and keeps the old user_id. A newID that is already the
	// user's changes nothing. ErrNotFound when no user has the email;
	// ErrAlreadyExists, naming the holder, when another user has newID.
	RelinkUser(ctx context.Context, email, newID string) (*UserRelink, error)

	// AppendEvents records changes that are not a status write of the
	// store's own (a TTL warning, an extension, an exec session), each
	// numbered after its experiment's last event and kept within
	// MaxEventsPerExp, in one transaction. Status, reason, message and
	// node pool changes of experiments and jobs are recorded by the store
	// itself, in the transaction that writes them. An event whose
	// experiment does not exist is ErrNotFound.
	AppendEvents(ctx context.Context, events []Event) error
	// ListEvents returns an experiment's events after f.AfterSeq, oldest
	// first; an unknown experiment has none.
	ListEvents(ctx context.Context, f EventFilter) ([]Event, error)
	// OtherWrites lists the events other Store instances on the same
	// database (other server replicas) wrote at or after since, oldest
	// first, at most limit: how a server learns of the changes it did not
	// make.
	OtherWrites(ctx context.Context, since time.Time, limit int) ([]EventRef, error)

	// AppendAudit records one mutating call. A zero At means now.
	AppendAudit(ctx context.Context, e AuditEntry) error
	ListAudit(ctx context.Context, f AuditFilter) (items []*AuditEntry, next string, err error)

	Close() error
}

// NameTakenError is the error for a second experiment with a name: it
// names the experiment holding it (holder; "" when it could not be read),
// so the user can look at it or pick another name.
func NameTakenError(name, holder string) error {
	by := "another experiment"
	if holder != "" {
		by = "experiment " + holder
	}
	return errdefs.AlreadyExists("name: %q is already used by %s; names are unique, so pick another (e.g. add a run number) or let falcon exp create --generate-name add a suffix", name, by)
}
