package apiserver_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

func TestUpdateJobStatuses(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	exp := env.Create(t, "batch", map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}, "b": {Command: "x", Replica: 1}})
	a, b := exp.GetJobs()[0].GetId(), exp.GetJobs()[1].GetId()
	ctx := context.Background()
	resp, err := env.Jobs.UpdateJobStatuses(ctx, &falconv1.UpdateJobStatusesRequest{Updates: []*falconv1.UpdateJobStatusRequest{
		{Id: a, ExpectedStatus: "Pending", Status: "Pending", Reason: "Waiting", Message: "queue position 1"},
		{Id: b, ExpectedStatus: "Running", Status: "Running"},
		{Id: b, ExpectedStatus: "Pending", Status: "Bogus"},
		{Id: b, ExpectedStatus: "Pending", Status: "Pending", Reason: "Waiting", Message: "queue position 2"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		code codes.Code
		msg  string // the written job's message
	}{
		{"written", codes.OK, "queue position 1"},
		{"stale precondition", codes.FailedPrecondition, ""},
		{"invalid status", codes.InvalidArgument, ""},
		{"written after a refusal", codes.OK, "queue position 2"},
	}
	for i, tc := range tests {
		r := resp.GetResults()[i]
		if codes.Code(r.GetCode()) != tc.code || r.GetJob().GetMessage() != tc.msg {
			t.Errorf("%s: code %v %q, job message %q; want %v, %q", tc.name, codes.Code(r.GetCode()), r.GetMessage(), r.GetJob().GetMessage(), tc.code, tc.msg)
		}
	}
	// Controllers only.
	_, err = falconv1.NewJobServiceClient(env.UserConn).UpdateJobStatuses(ctx, &falconv1.UpdateJobStatusesRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("a user's batch: %v, want PermissionDenied", err)
	}
	// Bounded.
	_, err = env.Jobs.UpdateJobStatuses(ctx, &falconv1.UpdateJobStatusesRequest{Updates: make([]*falconv1.UpdateJobStatusRequest, 1001)})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("1001 updates: %v, want InvalidArgument", err)
	}
}

// A batch asked for configs returns each written job with its experiment's
// config, as GetJob does, so the resource manager submits a pick without
// reading it again; an update can ask for its own job's alone; without
// either flag the answer carries none.
func TestUpdateJobStatusesWithConfig(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	exp := env.Create(t, "cfg", map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}})
	id := exp.GetJobs()[0].GetId()
	ctx := context.Background()
	for _, tc := range []struct {
		name       string
		withConfig bool   // the call's flag
		own        bool   // the update's
		expected   string // the status the update expects
		want       string // the written job's config
	}{
		{"without the flag", false, false, "Pending", ""},
		{"with the flag", true, false, "Pending", "cfg-cfg"},
		{"with the update's flag", false, true, "Pending", "cfg-cfg"},
		{"a refused update carries no job", true, true, "Running", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := env.Jobs.UpdateJobStatuses(ctx, &falconv1.UpdateJobStatusesRequest{WithConfig: tc.withConfig, Updates: []*falconv1.UpdateJobStatusRequest{
				{Id: id, ExpectedStatus: tc.expected, Status: "Pending", Reason: "Waiting", Message: tc.name, WithConfig: tc.own},
			}})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetResults()[0].GetJob().GetConfig(); got != tc.want {
				t.Errorf("config %q, want %q", got, tc.want)
			}
		})
	}
}

// The expController's batch: in order, each under its own precondition, a
// success's two steps in one call; controllers only; bounded. Its changes
// reach the feed marked derived, so followers of jobs need not look again.
func TestUpdateExpStatuses(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	role := map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}}
	a, b := env.Create(t, "batch-a", role).GetId(), env.Create(t, "batch-b", role).GetId()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := watchAfterHello(t, ctx, env)
	ctl := falconv1.NewExperimentServiceClient(env.Conn) // the controllers' connection
	resp, err := ctl.UpdateExpStatuses(ctx, &falconv1.UpdateExpStatusesRequest{Updates: []*falconv1.UpdateExpStatusRequest{
		{Id: a, ExpectedStatus: "Created", Status: "Running"},
		{Id: b, ExpectedStatus: "Running", Status: "Succeeded"},
		{Id: a, ExpectedStatus: "Running", Status: "Succeeded", Message: "done"},
		{Id: b, ExpectedStatus: "Created", Status: "Bogus"},
		{Id: b, ExpectedStatus: "created", Status: "Created", Reason: "Waiting", Message: "queue position 2"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		code   codes.Code
		status string // the written experiment's
	}{
		{"first step", codes.OK, "Running"},
		{"stale precondition", codes.FailedPrecondition, ""},
		{"second step sees the first", codes.OK, "Succeeded"},
		{"invalid status", codes.InvalidArgument, ""},
		{"written after a refusal", codes.OK, "Created"},
	}
	for i, tc := range tests {
		r := resp.GetResults()[i]
		if codes.Code(r.GetCode()) != tc.code || r.GetExperiment().GetStatus() != tc.status {
			t.Errorf("%s: code %v %q, experiment %q; want %v, %q", tc.name, codes.Code(r.GetCode()), r.GetMessage(), r.GetExperiment().GetStatus(), tc.code, tc.status)
		}
	}
	for range 3 {
		c, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c.GetKind() != "experiment" || !c.GetDerived() {
			t.Errorf("change of a batch write %v, want kind experiment, derived", c)
		}
	}
	// A job's change is news.
	j := env.Exp(t, b).GetJobs()[0].GetId()
	if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: j, ExpectedStatus: "Pending", Status: "Running"}); err != nil {
		t.Fatal(err)
	}
	if c, err := stream.Recv(); err != nil || c.GetKind() != "job" || c.GetDerived() {
		t.Errorf("change of a job write %v (%v), want kind job, not derived", c, err)
	}
	_, err = env.Exps.UpdateExpStatuses(ctx, &falconv1.UpdateExpStatusesRequest{})
	if status.Code(err) != codes.PermissionDenied {
		t.Errorf("a user's batch: %v, want PermissionDenied", err)
	}
	_, err = ctl.UpdateExpStatuses(ctx, &falconv1.UpdateExpStatusesRequest{Updates: make([]*falconv1.UpdateExpStatusRequest, 1001)})
	if status.Code(err) != codes.InvalidArgument {
		t.Errorf("1001 updates: %v, want InvalidArgument", err)
	}
	// ListExps by IDs: exactly those named, unknown ones left out, bounded.
	list, err := env.Exps.ListExps(ctx, &falconv1.ListExpsRequest{Ids: []string{a, "exp-zzzzzzzzzz"}})
	if err != nil || len(list.GetItems()) != 1 || list.GetItems()[0].GetId() != a {
		t.Errorf("ListExps by IDs = %v, %v; want %s alone", list.GetItems(), err, a)
	}
	_, err = env.Exps.ListExps(ctx, &falconv1.ListExpsRequest{Ids: make([]string, 1001)})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "ids") {
		t.Errorf("1001 IDs: %v, want InvalidArgument naming ids", err)
	}
}

// The expController's artifact batch: in order, each under its own
// precondition; controllers only; bounded; its changes derived.
func TestUpdateArtifactStatuses(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	role := map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}}
	a := env.Create(t, "arts-a", role).GetArtifact().GetId()
	b := env.Create(t, "arts-b", role).GetArtifact().GetId()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := watchAfterHello(t, ctx, env)
	resp, err := env.Arts.UpdateArtifactStatuses(ctx, &falconv1.UpdateArtifactStatusesRequest{Updates: []*falconv1.UpdateArtifactStatusRequest{
		{Id: a, ExpectedStatus: "Created", Status: "Succeeded", Message: "kept"},
		{Id: a, ExpectedStatus: "Created", Status: "Failed"},
		{Id: b, ExpectedStatus: "Created", Status: "Bogus"},
		{Id: b, ExpectedStatus: "Created", Status: "Failed", Reason: "Aborted"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct {
		name   string
		code   codes.Code
		status string
	}{
		{"written", codes.OK, "Succeeded"},
		{"stale: sees the first", codes.FailedPrecondition, ""},
		{"invalid status", codes.InvalidArgument, ""},
		{"written after refusals", codes.OK, "Failed"},
	} {
		r := resp.GetResults()[i]
		if codes.Code(r.GetCode()) != tc.code || r.GetArtifact().GetStatus() != tc.status {
			t.Errorf("%s: code %v %q, artifact %q; want %v, %q", tc.name, codes.Code(r.GetCode()), r.GetMessage(), r.GetArtifact().GetStatus(), tc.code, tc.status)
		}
	}
	for range 2 {
		c, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c.GetKind() != "artifact" || !c.GetDerived() {
			t.Errorf("change of a batch write %v, want kind artifact, derived", c)
		}
	}
	if _, err := falconv1.NewArtifactServiceClient(env.UserConn).UpdateArtifactStatuses(ctx, &falconv1.UpdateArtifactStatusesRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Errorf("a user's batch: %v, want PermissionDenied", err)
	}
	if _, err := env.Arts.UpdateArtifactStatuses(ctx, &falconv1.UpdateArtifactStatusesRequest{Updates: make([]*falconv1.UpdateArtifactStatusRequest, 1001)}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("1001 updates: %v, want InvalidArgument", err)
	}
}

// watchAfterHello is a change stream of env's server, its hello read.
func watchAfterHello(t *testing.T, ctx context.Context, env *apitest.Env) grpc.ServerStreamingClient[falconv1.Change] {
	t.Helper()
	stream, err := env.Jobs.WatchChanges(ctx, &falconv1.WatchChangesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil { // the hello
		t.Fatal(err)
	}
	return stream
}

// A status write made under a writer's name (falconv1.WriterKey) reaches
// the feed carrying it, single or batched, so that writer can skip its
// echo; a write made under no name carries none.
func TestJobChangesNameTheirWriter(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	id := env.Create(t, "writer", map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}}).GetJobs()[0].GetId()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := watchAfterHello(t, ctx, env)
	for i, tc := range []struct {
		writer string
		batch  bool
	}{{"rm-1", false}, {"rm-1", true}, {"", false}, {"", true}} {
		wctx := ctx
		if tc.writer != "" {
			wctx = metadata.AppendToOutgoingContext(ctx, falconv1.WriterKey, tc.writer)
		}
		u := &falconv1.UpdateJobStatusRequest{Id: id, ExpectedStatus: "Pending", Status: "Pending", Reason: "Waiting", Message: fmt.Sprintf("write %d", i)}
		var err error
		if tc.batch {
			_, err = env.Jobs.UpdateJobStatuses(wctx, &falconv1.UpdateJobStatusesRequest{Updates: []*falconv1.UpdateJobStatusRequest{u}})
		} else {
			_, err = env.Jobs.UpdateJobStatus(wctx, u)
		}
		if err != nil {
			t.Fatal(err)
		}
		c, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c.GetKind() != "job" || c.GetId() != id || c.GetWriter() != tc.writer {
			t.Errorf("write %d (batch %t): change %v, want job %s written by %q", i, tc.batch, c, id, tc.writer)
		}
	}
}

// A job's end written through the API server is its experiment's end in
// the same write, with no controller running: single or batched, the
// experiment and its artifact are terminal as soon as the call returns,
// and the feed carries the experiment's change, derived.
func TestAJobsEndIsItsExperiments(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, batch := range []bool{false, true} {
		exp := env.Create(t, fmt.Sprintf("ends-%t", batch), map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}})
		id := exp.GetJobs()[0].GetId()
		stream := watchAfterHello(t, ctx, env)
		for _, u := range []*falconv1.UpdateJobStatusRequest{
			{Id: id, ExpectedStatus: "Pending", Status: "Running"},
			{Id: id, ExpectedStatus: "Running", Status: "Failed", Reason: "JobFailed", Message: "rank 0 exited with code 3"},
		} {
			var err error
			if batch {
				_, err = env.Jobs.UpdateJobStatuses(ctx, &falconv1.UpdateJobStatusesRequest{Updates: []*falconv1.UpdateJobStatusRequest{u}})
			} else {
				_, err = env.Jobs.UpdateJobStatus(ctx, u)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		got := env.Exp(t, exp.GetId())
		if got.GetStatus() != "Failed" || got.GetReason() != "JobFailed" || got.GetMessage() != "role a: rank 0 exited with code 3" ||
			got.GetArtifact().GetStatus() != "Failed" || got.GetFinishedAt() == nil {
			t.Errorf("batch %t: experiment %s/%s %q, artifact %s, want Failed/JobFailed naming role a with its artifact Failed",
				batch, got.GetStatus(), got.GetReason(), got.GetMessage(), got.GetArtifact().GetStatus())
		}
		var kinds []string
		for range 4 {
			c, err := stream.Recv()
			if err != nil {
				t.Fatal(err)
			}
			kinds = append(kinds, fmt.Sprintf("%s:derived=%t:settled=%t", c.GetKind(), c.GetDerived(), c.GetSettled()))
		}
		// The job's changes settled their experiment (one role, no
		// time-to-live: nothing left for the expController).
		want := "job:derived=false:settled=true experiment:derived=true:settled=false"
		if want = want + " " + want; strings.Join(kinds, " ") != want {
			t.Errorf("batch %t: changes %v, want %s", batch, kinds, want)
		}
	}
	// A role that fails beside a running one leaves its sibling to stop:
	// not settled. Nor is a job of an experiment with a time-to-live.
	stream := watchAfterHello(t, ctx, env)
	two := env.Create(t, "unsettled", map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}, "b": {Command: "x", Replica: 1}})
	for _, j := range two.GetJobs() {
		if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: j.GetId(), ExpectedStatus: "Pending", Status: "Running"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: two.GetJobs()[0].GetId(), ExpectedStatus: "Running", Status: "Failed", Reason: "JobFailed", Message: "exit 1"}); err != nil {
		t.Fatal(err)
	}
	ttl, err := env.Exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{Name: "with-ttl", Ttl: durationpb.New(time.Hour),
		RoleToTaskSpec: map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: ttl.GetJobs()[0].GetId(), ExpectedStatus: "Pending", Status: "Running"}); err != nil {
		t.Fatal(err)
	}
	var got []string
	for len(got) < 4 {
		c, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c.GetKind() == "job" {
			got = append(got, fmt.Sprintf("%s:%t", c.GetExpId(), c.GetSettled()))
		}
	}
	want := []string{two.GetId() + ":true", two.GetId() + ":true", two.GetId() + ":false", ttl.GetId() + ":false"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("job changes %v, want %v", got, want)
	}
}

// An experiment's creation is settled when it leaves the expController
// nothing to do: one role, no time-to-live. The expController would
// otherwise read every new experiment with its jobs and artifacts.
func TestACreationIsSettledWithoutATimeToLive(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stream := watchAfterHello(t, ctx, env)
	spec := map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}}
	plain := env.Create(t, "plain", spec)
	var want []string
	want = append(want, plain.GetId()+":true")
	for _, e := range []*falconv1.Experiment{
		{Name: "with-ttl", Ttl: durationpb.New(time.Hour), RoleToTaskSpec: spec},
		{Name: "with-idle-ttl", IdleTtl: durationpb.New(time.Hour), RoleToTaskSpec: spec},
		// Its message names the first role once the expController has
		// looked (lifecycle.Propagate), so there is something to do.
		{Name: "two-roles", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"a": {Command: "x", Replica: 1}, "b": {Command: "x", Replica: 1}}},
	} {
		x, err := env.Exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: e})
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, x.GetId()+":false")
	}
	var got []string
	for len(got) < len(want) {
		c, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if c.GetKind() == "experiment" {
			got = append(got, fmt.Sprintf("%s:%t", c.GetId(), c.GetSettled()))
		}
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Errorf("creation changes %v, want %v", got, want)
	}
}
