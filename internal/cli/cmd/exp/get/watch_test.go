package get

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// -w prints the experiment, then again on every change that shows, one
// JSON object per line, and exits once it and its jobs ended.
func TestGetWatch(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx := context.Background()
	exp := env.Create(t, "watched", map[string]*falconv1.TaskSpec{"main": {Command: "true", Replica: 1}})
	id, job := exp.GetId(), exp.GetJobs()[0].GetId()

	f, s := clitest.NewFactory(t, "http://"+env.HTTPAddr, output.JSON)
	done := make(chan error, 1)
	go func() { done <- clitest.Execute(NewCmdGet(f, nil), id, "-w") }()
	lines := func() []string { return strings.Split(strings.TrimSpace(s.Out.String()), "\n") }
	deadline := time.Now().Add(10 * time.Second)
	for s.Out.Len() == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	steps := []func() error{
		func() error {
			_, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Pending", Status: "Running"})
			return err
		},
		func() error {
			_, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: "Running", Status: "Succeeded"})
			return err
		},
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatal(err)
		}
		// Each change is printed before the next is made.
		for len(lines()) < i+2 && time.Now().Before(deadline) {
			time.Sleep(10 * time.Millisecond)
		}
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("get -w did not exit once the experiment ended:\n%s", s.Out)
	}
	var got []string
	for _, l := range lines() {
		var e struct {
			Status string `json:"status"`
			Jobs   []struct {
				Status string `json:"status"`
			} `json:"jobs"`
		}
		if err := json.Unmarshal([]byte(l), &e); err != nil {
			t.Fatalf("line %q is not one JSON object: %v", l, err)
		}
		// The experiment's files are indexed once more when it ends, which
		// shows and may come after the end was printed: a second object of
		// the same statuses.
		if s := e.Status + "/" + e.Jobs[0].Status; len(got) == 0 || got[len(got)-1] != s {
			got = append(got, s)
		}
	}
	// Each job write carries its experiment along: one object for both.
	want := "Created/Pending Running/Running Succeeded/Succeeded"
	if strings.Join(got, " ") != want {
		t.Errorf("printed %v, want %s", got, want)
	}
}
