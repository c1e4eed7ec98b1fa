package apiserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// A create answers with the experiment exactly as a later read returns it
// (its jobs and artifact path included), although the answer is built from
// what the create wrote rather than read back.
func TestCreateAnswersWhatAGetReads(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		exp  *falconv1.Experiment
	}{
		{"one role", &falconv1.Experiment{Name: "answer-one", RoleToTaskSpec: map[string]*falconv1.TaskSpec{
			"main": {Command: "true", Replica: 1},
		}}},
		{"everything set", &falconv1.Experiment{
			Name: "answer-all", ExpType: "sweep", Priority: 3, Tags: []string{"a", "b"}, Config: "lr: 0.1\n",
			Ttl: durationpb.New(2 * time.Hour), IdleTtl: durationpb.New(30 * time.Minute),
			Metrics: []*falconv1.MetricSpec{{Name: "step_time", Pattern: `step_time: (?P<value>[0-9.]+)`, Better: "lower"}},
			RoleToTaskSpec: map[string]*falconv1.TaskSpec{
				"worker": {Command: "python train.py", Replica: 2, Envs: map[string]string{"A": "1"}, TimeoutSeconds: 600},
				"eval":   {Command: "python eval.py", Replica: 1},
			},
		}},
		{"interactive", &falconv1.Experiment{Name: "answer-interactive", Interactive: true, Ttl: durationpb.New(time.Hour),
			RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Replica: 1}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			created, err := env.Exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: tc.exp})
			if err != nil {
				t.Fatal(err)
			}
			read, err := env.Exps.GetExp(ctx, &falconv1.GetExpRequest{Id: created.GetId()})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(read, created, protocmp.Transform()); diff != "" {
				t.Errorf("the create's answer differs from a read of the experiment (-read +answer):\n%s", diff)
			}
		})
	}
}
