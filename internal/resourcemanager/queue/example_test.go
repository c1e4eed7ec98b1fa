package queue_test

import (
	"fmt"
	"time"

	"github.com/falconhq/falcon/internal/resourcemanager/queue"
)

// One scheduling cycle: place new jobs, hand free slots out, tell everyone
// still waiting where they stand, and free the slot once pods run.
func Example() {
	s := queue.New()
	clusters := []queue.Cluster{
		{Name: "us-east", Active: true, Accelerators: map[string]int{"v7x": 0}},
		{Name: "eu-west", Active: false, Accelerators: map[string]int{"v7x": 0}}, // maintenance
	}
	created := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	for i, j := range []struct{ id, actor, name string }{
		{"j1", "user-a", "profiling-v7x"},
		{"j2", "user-a", "sweep-v7x"},
		{"j3", "user-b", "benchmark-v7x"},
		{"j4", "user-c", "train-v7x"},
	} {
		job := queue.Job{ID: j.id, Actor: j.actor, Name: j.name, AcceleratorType: "v7x",
			Topology: "2x2x4", Created: created.Add(time.Duration(i) * time.Minute)}
		if _, err := s.Enqueue(job, clusters); err != nil {
			fmt.Println(job.ID, err)
		}
	}
	for _, key := range s.Ready() {
		if job, ok := s.Pick(key); ok {
			fmt.Printf("%s: %s is Provisioning\n", key, job.ID)
		}
	}
	for _, p := range s.Waiting(queue.Key{Cluster: "us-east", Topology: "2x2x4"}) {
		fmt.Printf("%s: %s\n", p.ID, p.Message())
	}
	_ = s.Release("j1") // its pods are Running
	fmt.Println(s.Ready())
	// Output:
	// us-east/2x2x4: j1 is Provisioning
	// j3: queue position #1, next in line, waiting for user-a: profiling-v7x to finish acquiring resources
	// j2: queue position #2, 1 ahead: user-b: benchmark-v7x
	// j4: queue position #3, 2 ahead: user-b: benchmark-v7x, user-a: sweep-v7x
	// [us-east/2x2x4]
}
