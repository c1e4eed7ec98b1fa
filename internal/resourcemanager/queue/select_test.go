package queue_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// cl returns an active cluster offering v7x at priority 0.
func cl(name string, opts ...func(*queue.Cluster)) queue.Cluster {
	c := queue.Cluster{Name: name, Active: true, Accelerators: map[string]int{"v7x": 0}}
	for _, o := range opts {
		o(&c)
	}
	return c
}

func inactive(c *queue.Cluster) { c.Active = false }
func idle(topo string) func(*queue.Cluster) {
	return func(c *queue.Cluster) { c.IdlePools = map[queue.Pool]int{{AcceleratorType: "v7x", Topology: topo}: 1} }
}
func priority(p int) func(*queue.Cluster) {
	return func(c *queue.Cluster) { c.Accelerators["v7x"] = p }
}
func maxDepth(n int) func(*queue.Cluster) { return func(c *queue.Cluster) { c.MaxQueueDepth = n } }
func offersOnly(typ string) func(*queue.Cluster) {
	return func(c *queue.Cluster) { c.Accelerators = map[string]int{typ: 0} }
}

func TestSelect(t *testing.T) {
	pinned := func(cluster string) queue.Job {
		j := job("new", "alice", 100)
		j.PinnedCluster = cluster
		return j
	}
	unplaceable := func(r queue.Reason, msg string) error {
		return &queue.UnplaceableError{JobID: "new", Reason: r, Message: msg}
	}
	tests := []struct {
		name     string
		clusters []queue.Cluster
		depths   map[string]int // cluster -> jobs already queued for 2x2x4
		job      queue.Job
		want     string
		wantErr  error
	}{
		{
			name:     "idle pool of the topology wins over a shorter queue",
			clusters: []queue.Cluster{cl("c1", idle("2x2x4")), cl("c2")},
			depths:   map[string]int{"c1": 3},
			want:     "c1",
		},
		{
			name:     "idle pool of another topology does not count",
			clusters: []queue.Cluster{cl("c1", idle("4x4x4")), cl("c2")},
			depths:   map[string]int{"c1": 1},
			want:     "c2",
		},
		{
			// The queue key names its type (v7x:2x2x4 in the resource
			// manager) and GPU queues ignore hosts; pools are matched by
			// the job's pool shape.
			name:     "idle pool of the job's pool shape wins, whatever its queue is called",
			clusters: []queue.Cluster{cl("c1", idle("1x8gpu")), cl("c2")},
			depths:   map[string]int{"c1": 3},
			job:      func() queue.Job { j := job("new", "alice", 100); j.Shape = "1x8gpu"; return j }(),
			want:     "c1",
		},
		{
			name:     "idle pool named like the queue but of another shape does not count",
			clusters: []queue.Cluster{cl("c1", idle("2x2x4")), cl("c2")},
			depths:   map[string]int{"c1": 1},
			job:      func() queue.Job { j := job("new", "alice", 100); j.Shape = "2x4gpu"; return j }(),
			want:     "c2",
		},
		{
			name:     "no idle pool: shortest queue",
			clusters: []queue.Cluster{cl("c1"), cl("c2"), cl("c3")},
			depths:   map[string]int{"c1": 2, "c2": 1, "c3": 4},
			want:     "c2",
		},
		{
			name:     "equal queues: higher priority",
			clusters: []queue.Cluster{cl("c1"), cl("c2", priority(10))},
			want:     "c2",
		},
		{
			name:     "all equal: smaller name",
			clusters: []queue.Cluster{cl("c-b"), cl("c-a")},
			want:     "c-a",
		},
		{
			name:     "inactive cluster gets nothing new, even with an idle pool",
			clusters: []queue.Cluster{cl("c1", inactive, idle("2x2x4")), cl("c2")},
			depths:   map[string]int{"c2": 5},
			want:     "c2",
		},
		{
			name:     "cluster not offering the type is skipped",
			clusters: []queue.Cluster{cl("c1", offersOnly("v6e")), cl("c2")},
			depths:   map[string]int{"c2": 5},
			want:     "c2",
		},
		{
			name:     "cluster at max depth is skipped, idle pool or not",
			clusters: []queue.Cluster{cl("c1", idle("2x2x4"), maxDepth(2)), cl("c2", maxDepth(2))},
			depths:   map[string]int{"c1": 2, "c2": 1},
			want:     "c2",
		},
		{
			name:     "all at max depth",
			clusters: []queue.Cluster{cl("c1", maxDepth(2)), cl("c2", maxDepth(1)), cl("c3", inactive)},
			depths:   map[string]int{"c1": 2, "c2": 1},
			wantErr:  unplaceable(queue.QueuesFull, "all clusters offering v7x are at max queue depth for 2x2x4"),
		},
		{
			name:     "no active cluster offers the type",
			clusters: []queue.Cluster{cl("c1", inactive), cl("c2", offersOnly("v6e"))},
			wantErr:  unplaceable(queue.NoActiveCluster, "no active cluster offers v7x"),
		},
		{
			name:    "no candidates at all",
			wantErr: unplaceable(queue.NoActiveCluster, "no active cluster offers v7x"),
		},
		{
			name:     "pinned job goes to its cluster only",
			clusters: []queue.Cluster{cl("c1", idle("2x2x4")), cl("c2")},
			depths:   map[string]int{"c2": 9},
			job:      pinned("c2"),
			want:     "c2",
		},
		{
			name:     "pinned cluster inactive",
			clusters: []queue.Cluster{cl("c1"), cl("c2", inactive)},
			job:      pinned("c2"),
			wantErr:  unplaceable(queue.PinnedClusterUnavailable, "pinned cluster c2 is not active"),
		},
		{
			name:     "pinned cluster lacks the type",
			clusters: []queue.Cluster{cl("c1"), cl("c2", offersOnly("v6e"))},
			job:      pinned("c2"),
			wantErr:  unplaceable(queue.PinnedClusterUnavailable, "pinned cluster c2 does not offer v7x"),
		},
		{
			name:     "pinned cluster not among the candidates",
			clusters: []queue.Cluster{cl("c1")},
			job:      pinned("c9"),
			wantErr:  unplaceable(queue.PinnedClusterUnavailable, "pinned cluster c9 is not a candidate for v7x"),
		},
		{
			name:     "pinned cluster at max depth",
			clusters: []queue.Cluster{cl("c1"), cl("c2", maxDepth(1))},
			depths:   map[string]int{"c2": 1},
			job:      pinned("c2"),
			wantErr:  unplaceable(queue.QueuesFull, "pinned cluster c2 is at max queue depth (1) for v7x 2x2x4"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := queue.New()
			for c, n := range tt.depths {
				for i := range n {
					add(t, s, queue.Key{Cluster: c, Topology: "2x2x4"}, job(fmt.Sprintf("%s-%d", c, i), "filler", i))
				}
			}
			j := tt.job
			if j.ID == "" {
				j = job("new", "alice", 100)
			}
			got, err := s.Select(j, tt.clusters)
			// Every Select error here is an *UnplaceableError; cmp compares
			// its fields.
			if diff := cmp.Diff(tt.wantErr, err); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if tt.wantErr != nil {
				if !errors.Is(err, queue.ErrUnplaceable) {
					t.Errorf("errors.Is(%v, ErrUnplaceable) = false", err)
				}
				return
			}
			if want := (queue.Key{Cluster: tt.want, Topology: "2x2x4"}); got != want {
				t.Errorf("Select = %s; want %s", got, want)
			}
		})
	}
}

func TestEnqueueBalancesAndIsIdempotent(t *testing.T) {
	s := queue.New()
	clusters := []queue.Cluster{cl("c1"), cl("c2")}
	var got []string
	for i := range 4 {
		key, err := s.Enqueue(job(fmt.Sprint("j", i), "alice", i), clusters)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, key.Cluster)
	}
	if diff := cmp.Diff([]string{"c1", "c2", "c1", "c2"}, got); diff != "" {
		t.Errorf("clusters chosen (-want +got):\n%s", diff)
	}
	// The caller re-enqueues every Pending job each cycle; a queued job
	// keeps its queue even if another cluster now looks better.
	key, err := s.Enqueue(job("j1", "alice", 1), []queue.Cluster{cl("c1", idle("2x2x4"))})
	if err != nil || key.Cluster != "c2" {
		t.Errorf("re-Enqueue(j1) = %s, %v; want c2/2x2x4, nil", key, err)
	}
	if got := s.Depth(queue.Key{Cluster: "c2", Topology: "2x2x4"}); got != 2 {
		t.Errorf("Depth(c2) = %d; want 2", got)
	}
}
