package queue_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// model is the pick rule written as plainly as the design doc states it,
// with no indexes: collect waiting jobs, group by actor, take each actor's
// earliest, drop the last served actor if more than one remains, take the
// earliest. The Scheduler must agree with it on every step.
type model struct {
	waiting    []queue.Job
	acquiring  string
	lastServed string
}

func earlier(a, b queue.Job) bool {
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.ID < b.ID
}

func (m *model) pickIndex() int {
	heads := map[string]int{}
	for i, j := range m.waiting {
		if h, ok := heads[j.Actor]; !ok || earlier(j, m.waiting[h]) {
			heads[j.Actor] = i
		}
	}
	if len(heads) > 1 {
		delete(heads, m.lastServed)
	}
	best := -1
	for _, i := range heads {
		if best < 0 || earlier(m.waiting[i], m.waiting[best]) {
			best = i
		}
	}
	return best
}

func (m *model) pick() (queue.Job, bool) {
	if m.acquiring != "" || len(m.waiting) == 0 {
		return queue.Job{}, false
	}
	i := m.pickIndex()
	j := m.waiting[i]
	m.waiting = slices.Delete(m.waiting, i, i+1)
	m.acquiring, m.lastServed = j.ID, j.Actor
	return j, true
}

// order plays the picks out on a copy.
func (m model) order() []string {
	c := model{waiting: slices.Clone(m.waiting), lastServed: m.lastServed}
	var ids []string
	for {
		j, ok := c.pick()
		if !ok {
			return ids
		}
		ids = append(ids, j.ID)
		c.acquiring = ""
	}
}

// TestAgainstModel drives the Scheduler and the model with the same random
// operations, with few actors and coarse created times so ties are common.
func TestAgainstModel(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []queue.Key{{Cluster: "c1", Topology: "2x2x4"}, {Cluster: "c2", Topology: "2x2x4"}}
	s := queue.New()
	models := map[queue.Key]*model{keys[0]: {}, keys[1]: {}}
	next := 0
	for step := range 20000 {
		key := keys[rng.IntN(len(keys))]
		m := models[key]
		op := rng.IntN(10)
		if len(m.waiting) > 40 { // keep the quadratic model fast
			op = 7
		}
		switch {
		case op < 4: // add
			next++
			j := job(fmt.Sprint("j", next), fmt.Sprint("actor", rng.IntN(4)), rng.IntN(30))
			j.Created = j.Created.Add(time.Duration(step) * time.Second / 4)
			add(t, s, key, j)
			m.waiting = append(m.waiting, j)
		case op < 6: // pick
			want, wantOK := m.pick()
			got, gotOK := s.Pick(key)
			if got.ID != want.ID || gotOK != wantOK {
				t.Fatalf("step %d: Pick(%s) = %q, %v; model says %q, %v", step, key, got.ID, gotOK, want.ID, wantOK)
			}
		case op < 7: // release or remove the acquiring job
			if m.acquiring == "" {
				continue
			}
			free := s.Release
			if rng.IntN(2) == 0 {
				free = s.Remove
			}
			if err := free(m.acquiring); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			m.acquiring = ""
		case op < 9: // abort a waiting job
			if len(m.waiting) == 0 {
				continue
			}
			i := rng.IntN(len(m.waiting))
			if err := s.Remove(m.waiting[i].ID); err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			m.waiting = slices.Delete(m.waiting, i, i+1)
		default:
			a := fmt.Sprint("actor", rng.IntN(5))
			s.SetLastServed(key, a)
			m.lastServed = a
		}
		if rng.IntN(3) == 0 || step%1000 == 0 {
			if diff := cmp.Diff(m.order(), waitingIDs(s, key)); diff != "" {
				t.Fatalf("step %d: Waiting(%s) order (-model +scheduler):\n%s", step, key, diff)
			}
		}
		want := len(m.waiting)
		if m.acquiring != "" {
			want++
		}
		if got := s.Depth(key); got != want {
			t.Fatalf("step %d: Depth(%s) = %d; want %d", step, key, got, want)
		}
	}
}
