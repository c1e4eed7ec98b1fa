package cloudlog_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"cloud.google.com/go/logging/apiv2/loggingpb"

	"github.com/falconhq/falcon/internal/cloudlog"
	"github.com/falconhq/falcon/internal/cloudlog/cloudlogtest"
)

// workload is target as the fake writes it.
var workload = cloudlogtest.Workload{
	Project: target.Project, Location: target.Location, Cluster: target.Cluster,
	Namespace: target.Namespace, Job: target.Workload,
}

// t0 is a minute before the since of 001's acceptance table.
var t0 = time.Date(2026, 4, 12, 23, 59, 0, 0, time.UTC)

// lineAt is the time of line i of rank: a second apart, ranks a millisecond
// apart so the merged order is known.
func lineAt(rank, i int) time.Time {
	return t0.Add(time.Duration(i)*time.Second + time.Duration(rank)*time.Millisecond)
}

// text is line i of rank: every tenth reports a step time.
func text(rank, i int) string {
	if i%10 == 0 {
		return fmt.Sprintf("step %d step_time: 0.%03d rank=%d", i/10, i, rank)
	}
	return fmt.Sprintf("rank %d line %d", rank, i)
}

// rankLines are the entries of n lines of rank, with the completion-index
// label unless noLabel.
func rankLines(w cloudlogtest.Workload, rank, n int, noLabel bool) []*loggingpb.LogEntry {
	label := rank
	if noLabel {
		label = -1
	}
	out := make([]*loggingpb.LogEntry, n)
	for i := range n {
		out[i] = w.Entry(w.Pod(rank), label, lineAt(rank, i), text(rank, i))
	}
	return out
}

// noise are entries that share all but one of the filter's clauses with
// the workload's, so that each clause is shown to matter.
func noise() []*loggingpb.LogEntry {
	other := workload
	other.Job = "job-other"
	otherNS := workload
	otherNS.Namespace = "kube-system"
	otherCluster := workload
	otherCluster.Cluster = "gpu-a3"
	otherProject := workload
	otherProject.Project = "someone-else"
	otherLocation := workload
	otherLocation.Location = "europe-west4"
	pod := workload.Entry(workload.Pod(0), 0, lineAt(0, 5), "k8s_pod event, not a container line")
	pod.Resource.Type = "k8s_pod"
	var out []*loggingpb.LogEntry
	for _, w := range []cloudlogtest.Workload{other, otherNS, otherCluster, otherProject, otherLocation} {
		out = append(out, w.Entry(w.Pod(0), 0, lineAt(0, 5), "noise from "+w.Job+"/"+w.Namespace+"/"+w.Cluster+"/"+w.Project+"/"+w.Location))
	}
	return append(out, pod)
}

type env struct {
	srv *cloudlogtest.Server
	r   *cloudlog.Retriever
}

func newEnv(t testing.TB, opts ...cloudlog.Option) *env {
	t.Helper()
	srv := cloudlogtest.Start(t)
	r, err := cloudlog.New(context.Background(), srv.ClientOptions(), opts...)
	if err != nil {
		t.Fatalf("cloudlog.New: %v", err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return &env{srv: srv, r: r}
}

// collect streams the whole (unfollowed) log.
func (e *env) collect(t testing.TB, f cloudlog.Filter) ([]cloudlog.Line, error) {
	t.Helper()
	var out []cloudlog.Line
	err := e.r.Stream(context.Background(), target, f, false, func(l cloudlog.Line) error {
		out = append(out, l)
		return nil
	})
	return out, err
}

func texts(lines []cloudlog.Line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = l.Text
	}
	return out
}

// expected are the texts of lines [from, to) of rank.
func expected(rank, from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, text(rank, i))
	}
	return out
}
