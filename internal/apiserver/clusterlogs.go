package apiserver

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"maps"
	"math"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/cloudlog"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
	"github.com/falconhq/falcon/internal/podlogs"
	"github.com/falconhq/falcon/internal/provider/kube/render"
	"github.com/falconhq/falcon/internal/store"
	"github.com/falconhq/falcon/internal/xpk"
)

// KubeClients returns a client for a Kubernetes or GKE cluster and the
// namespace its jobs run in; the server reads pod logs with it. The server
// holds the cluster credentials, so a CLI never needs them.
type KubeClients func(ctx context.Context, c *store.Cluster) (kubernetes.Interface, string, error)

// WithKubeClients lets the server read pod logs through the clusters'
// apiservers. Without it, logs of jobs on Kubernetes and GKE clusters come
// from the clusters' buckets only.
func WithKubeClients(f KubeClients) Option { return func(s *Server) { s.kube = f } }

// WithCloudLogging reads the logs of GKE jobs whose pods are gone, and
// whose cluster bucket holds none, from Cloud Logging (001's
// CloudLogRetriever).
func WithCloudLogging(r *cloudlog.Retriever) Option { return func(s *Server) { s.cloudlog = r } }

// logCursor is a resume token's content: per job, the podlogs cursor.
type logCursor map[string]podlogs.Cursor

func (c logCursor) token() string {
	b, _ := json.Marshal(c)
	return base64.RawURLEncoding.EncodeToString(b)
}

func parseResume(tok string) (logCursor, error) {
	c := logCursor{}
	if tok == "" {
		return c, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil || json.Unmarshal(b, &c) != nil {
		return nil, errdefs.Invalid("resume", "is not a resume token this server issued (take it from a log line's resume field)")
	}
	return c, nil
}

// clusterLogs streams the logs of jobs on Kubernetes and GKE clusters: from
// the pod log API while the job's pods exist, else from the log objects
// its pods left in the cluster's bucket. With follow, jobs are read at
// once and their lines interleave; each pod's lines stay in order.
// resume holds a cursor for every job (see GetExpLogs); lines move it
// under b's lock.
func (s *Server) clusterLogs(ctx context.Context, req *falconv1.GetExpLogsRequest, jobs []*store.Job, b *lineBatcher, resume logCursor) error {
	emitFor := func(j *store.Job) func(podlogs.Line) error {
		return func(l podlogs.Line) error {
			return b.addFunc(func() *falconv1.LogLine {
				resume[j.ID].Advance(l)
				out := &falconv1.LogLine{JobId: j.ID, Role: j.Role, Rank: int32(l.Rank), Pod: l.Pod, Line: strings.ToValidUTF8(l.Text, "\uFFFD")}
				if !l.Time.IsZero() {
					out.Time = timestamppb.New(l.Time)
				}
				return out
			})
		}
	}
	read := func(j *store.Job) error {
		// A copy: the reader reads its start while lines move the cursor.
		b.mu.Lock()
		start := maps.Clone(resume[j.ID])
		b.mu.Unlock()
		opts := podlogs.Options{Tail: int(req.GetTail()), Grep: req.GetGrep(), Follow: req.GetFollow(), Resume: start}
		if req.Rank != nil {
			opts.Ranks = []int{int(req.GetRank())}
		}
		if req.GetSince() != nil {
			opts.Since = req.GetSince().AsTime()
		}
		return s.jobLogs(ctx, j, opts, emitFor(j))
	}
	if !req.GetFollow() {
		for _, j := range jobs {
			if err := read(j); err != nil {
				return err
			}
		}
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(jobs))
	for _, j := range jobs {
		go func() { errc <- read(j) }()
	}
	var first error
	for range jobs {
		if err := <-errc; err != nil && first == nil {
			first = err
			cancel()
		}
	}
	if errors.Is(first, context.Canceled) && ctx.Err() != nil {
		return nil // the client stopped following
	}
	return first
}

// jobLogs reads one job's logs from where they are.
func (s *Server) jobLogs(ctx context.Context, j *store.Job, opts podlogs.Options, emit func(podlogs.Line) error) error {
	c, err := s.store.GetCluster(ctx, j.ClusterName)
	if err != nil {
		return err
	}
	if c.Backend == "xpk" {
		// xpk runs the job on a GKE cluster this server holds no client
		// for (xpk has the credentials), and its pods write to no bucket of
		// Falcon's: Cloud Logging is where their lines are.
		if s.cloudlog == nil {
			return errdefs.Precondition("logs of job %s: cluster %s runs jobs through xpk, whose logs are read from Cloud Logging, and this server was started without it", j.ID, c.Name)
		}
		if opts.Follow {
			return s.followCloudLogs(ctx, c, j, opts, emit)
		}
		return s.cloudLogs(ctx, c, j, opts, emit)
	}
	if s.kube != nil {
		client, ns, err := s.kube(ctx, c)
		if err == nil {
			pods, err := client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: render.LabelJobID + "=" + j.ID, Limit: 1})
			if err == nil && (len(pods.Items) > 0 || c.GCSBucket == "") {
				return podlogs.Stream(ctx, client, ns, j.ID, opts, emit)
			}
			if err != nil && c.GCSBucket == "" {
				return errdefs.Unavailable("logs of job %s: cluster %s: %v", j.ID, c.Name, err)
			}
		} else if c.GCSBucket == "" {
			return err
		}
	}
	opts.Follow = false // what is left of a job whose pods are gone is complete
	if c.GCSBucket != "" {
		b, err := s.blobs.Bucket(ctx, blobstore.Location{Scheme: "gs", Bucket: c.GCSBucket})
		if err != nil {
			return err
		}
		n := 0
		count := func(l podlogs.Line) error { n++; return emit(l) }
		if err := podlogs.FromBucket(ctx, b, j.ID, opts, count); err != nil || n > 0 || s.cloudlog == nil || c.Backend != "gke" {
			return err
		}
	}
	if s.cloudlog != nil && c.Backend == "gke" {
		return s.cloudLogs(ctx, c, j, opts, emit)
	}
	if c.GCSBucket == "" {
		return errdefs.Precondition("logs of job %s: this server cannot reach cluster %s's pods, and the cluster has no gcs_bucket to keep logs in", j.ID, c.Name)
	}
	return nil
}

// followCloudLogs follows an xpk job's logs in Cloud Logging, every slice
// at once, until the job has ended and Cloud Logging's lateness has passed
// for its last lines; the job's status is read every logPoll, as falcon
// dev's follower reads its experiment's.
func (s *Server) followCloudLogs(ctx context.Context, c *store.Cluster, j *store.Job, opts podlogs.Options, emit func(podlogs.Line) error) error {
	fctx, stop := context.WithCancel(ctx)
	defer stop()
	ended := make(chan struct{})
	go func() {
		for {
			job, err := s.store.GetJob(fctx, j.ID)
			if err == nil && lifecycle.JobMachine.IsTerminal(job.Status) {
				select {
				case <-time.After(s.cloudlog.Lateness()):
					close(ended)
					stop()
				case <-fctx.Done():
				}
				return
			}
			select {
			case <-time.After(s.logPoll):
			case <-fctx.Done():
				return
			}
		}
	}()
	ws := logWorkloads(c, j)
	errc := make(chan error, len(ws))
	for _, w := range ws {
		go func() { errc <- s.cloudLogsOf(fctx, c, j, w, opts, true, emit) }()
	}
	var first error
	for range ws {
		if err := <-errc; err != nil && first == nil {
			first = err
			stop()
		}
	}
	select {
	case <-ended:
		return nil // the job ended and its last lines were given
	default:
	}
	if errors.Is(first, context.Canceled) && ctx.Err() != nil {
		return nil // the client stopped following
	}
	return first
}

// cloudLogs reads a GKE or xpk job's logs from Cloud Logging. A failure there
// marks the log missing with its reason; it never touches the job.
func (s *Server) cloudLogs(ctx context.Context, c *store.Cluster, j *store.Job, opts podlogs.Options, emit func(podlogs.Line) error) error {
	for _, w := range logWorkloads(c, j) {
		if err := s.cloudLogsOf(ctx, c, j, w, opts, false, emit); err != nil {
			return err
		}
	}
	return nil
}

// cloudLogsOf reads (or follows) the lines of one of j's workloads, its
// ranks moved to the Falcon job's. A failure there marks the log missing
// with its reason; it never touches the job.
func (s *Server) cloudLogsOf(ctx context.Context, c *store.Cluster, j *store.Job, w logWorkload, opts podlogs.Options, follow bool, emit func(podlogs.Line) error) error {
	name := c.Spec.GKECluster
	if name == "" {
		name = c.Name
	}
	ns := c.Spec.Namespace
	if ns == "" {
		ns = "default"
	}
	f := cloudlog.Filter{Ranks: opts.Ranks, Since: opts.Since, Grep: opts.Grep, Tail: opts.Tail}
	if f.Ranks != nil {
		f.Ranks = w.local(opts.Ranks)
		if len(f.Ranks) == 0 {
			return nil // no rank asked for runs in this workload
		}
	}
	t := cloudlog.Target{Project: c.Project, Location: c.Location, Cluster: name, Namespace: ns, Workload: w.name}
	err := s.cloudlog.Stream(ctx, t, f, follow, func(l cloudlog.Line) error {
		rank := l.Rank
		if rank >= 0 {
			rank += w.first
		}
		return emit(podlogs.Line{Pod: l.Pod, Rank: rank, Time: l.Time, Text: l.Text})
	})
	var re *cloudlog.RetrievalError
	if errors.As(err, &re) {
		if re.Retryable() {
			return errdefs.Unavailable("logs of job %s are missing for now: %s", j.ID, re.Reason())
		}
		return errdefs.Precondition("logs of job %s are missing: %s", j.ID, re.Reason())
	}
	return err
}

// logWorkload is one Kubernetes Job whose pods ran some of a Falcon job's
// ranks: its pods' completion indexes are ranks first, first+1, ….
type logWorkload struct {
	name         string
	first, hosts int
}

// local turns ranks of the Falcon job into this workload's completion
// indexes, leaving out those it does not run.
func (w logWorkload) local(ranks []int) []int {
	var out []int
	for _, r := range ranks {
		if r >= w.first && r < w.first+w.hosts {
			out = append(out, r-w.first)
		}
	}
	return out
}

// logWorkloads names the Kubernetes Jobs that ran j's pods. Falcon's own
// backends name the Job after the job, or each slice's after the job and
// the slice (render.JobNames). xpk submits a JobSet named after the
// workload, whose replicated job "slice-job" makes one Job per slice,
// <workload>-slice-job-<slice> (JobSet's rule <jobset>-<replicatedJob>-<index>),
// and GKE labels the pods' log entries with that Job's name. Each slice's
// pods are numbered from 0, so slice i holds ranks i*hosts ….
func logWorkloads(c *store.Cluster, j *store.Job) []logWorkload {
	hosts := int(max(j.TaskSpec.Replica, 1))
	slices := int(max(j.TaskSpec.Slices, 1))
	if c.Backend != "xpk" && slices == 1 {
		return []logWorkload{{name: j.ID, first: 0, hosts: math.MaxInt32}}
	}
	names := render.JobNames(j.ID, slices)
	out := make([]logWorkload, slices)
	for i := range out {
		name := names[i]
		if c.Backend == "xpk" {
			name = xpk.SliceJobName(xpk.WorkloadName(j.ID), i)
		}
		out[i] = logWorkload{name: name, first: i * hosts, hosts: hosts}
	}
	return out
}
