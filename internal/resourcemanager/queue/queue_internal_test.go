package queue

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestFIFO checks the tombstoned slice against a plain sorted list through
// random inserts (mostly in order, some earlier, some re-adds of removed
// IDs), pops and arbitrary removals, enough to trigger every compaction.
func TestFIFO(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	f := &fifo{actor: "a"}
	var want []*entry // sorted by rank
	var removed []*entry
	clock := int64(1000)
	ids := 0
	check := func(step int, op string) {
		t.Helper()
		var got []string
		for _, s := range f.slots[f.head:] {
			if s.e != nil {
				got = append(got, s.e.job.ID)
			}
		}
		var w []string
		for _, e := range want {
			w = append(w, e.job.ID)
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Fatalf("step %d after %s: live jobs (-want +got):\n%s", step, op, diff)
		}
		if f.live != len(want) {
			t.Fatalf("step %d after %s: live = %d; want %d", step, op, f.live, len(want))
		}
		if len(want) > 0 && (f.first != want[0].rank || f.slots[f.head].e != want[0]) {
			t.Fatalf("step %d after %s: head is %v; want %v", step, op, f.first, want[0].rank)
		}
		if !slices.IsSortedFunc(f.slots[f.head:], func(a, b slot) int { return compareRanks(a.rank, b.rank) }) {
			t.Fatalf("step %d after %s: slots not sorted", step, op)
		}
	}
	insert := func(e *entry) {
		f.insert(e)
		i, _ := slices.BinarySearchFunc(want, e.rank, func(x *entry, r rank) int { return compareRanks(x.rank, r) })
		want = slices.Insert(want, i, e)
	}
	for step := range 50000 {
		var op string
		switch r := rng.IntN(20); {
		case r < 8 || len(want) == 0:
			op = "insert"
			ids++
			created := clock
			if rng.IntN(10) == 0 { // out of order, sometimes before everything
				created -= rng.Int64N(2000)
			}
			clock += rng.Int64N(3)
			insert(&entry{job: Job{ID: fmt.Sprintf("j%06d", ids)}, rank: rank{created: created, id: fmt.Sprintf("j%06d", ids)}})
		case r < 9 && len(removed) > 0:
			op = "re-add"
			i := rng.IntN(len(removed))
			e := removed[i]
			removed = slices.Delete(removed, i, i+1)
			insert(e)
		case r < 14:
			op = "pop"
			if e := f.pop(); e != want[0] {
				t.Fatalf("step %d: pop = %s; want %s", step, e.job.ID, want[0].job.ID)
			}
			want = want[1:]
		default:
			op = "remove"
			i := rng.IntN(len(want))
			if i == 0 {
				f.pop()
			} else {
				f.remove(want[i])
			}
			removed = append(removed, want[i])
			want = slices.Delete(want, i, i+1)
		}
		check(step, op)
		if len(f.slots) > 4*len(want)+64 {
			t.Fatalf("step %d: %d slots for %d live jobs", step, len(f.slots), len(want))
		}
	}
}
