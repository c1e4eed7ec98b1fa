package apiserver_test

import (
	"context"
	"strings"
	"testing"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// An experiment created without a cluster gets a path under the server's
// artifact root; once its job is placed on a cluster with a bucket, the job
// writes there, and exp get says so in every copy of the path.
func TestArtifactPathFollowsPlacement(t *testing.T) {
	env := apitest.Start(t, nil)
	ctx := context.Background()
	cl := falconv1.NewClusterServiceClient(env.UserConn)
	if _, err := cl.RegisterCluster(ctx, &falconv1.RegisterClusterRequest{Cluster: &falconv1.Cluster{
		Name: "lab", Backend: "kubernetes", KubeContext: "lab", Namespace: "falcon", GcsBucket: "lab-bkt",
		Accelerators: []*falconv1.AcceleratorSlot{{Type: "v7x", Priority: 1}},
	}}); err != nil {
		t.Fatal(err)
	}
	exp := env.Create(t, "placed-later", map[string]*falconv1.TaskSpec{"main": {
		Command: "x", Image: "trainer:v1", Replica: 1, DeviceType: "v7x", DeviceTopo: "2x2x1"}})
	root := exp.GetArtifactPath()
	if strings.HasPrefix(root, "gs://lab-bkt/") {
		t.Fatalf("an unplaced experiment's path %q is already the cluster's bucket", root)
	}
	job := exp.GetJobs()[0].GetId()
	if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{
		Id: job, ExpectedStatus: "Pending", Status: "Pending", Reason: "Dispatching", Message: "picked", ClusterName: "lab"}); err != nil {
		t.Fatal(err)
	}
	got := env.Exp(t, exp.GetId())
	want := "gs://lab-bkt/experiments/" + exp.GetId() + "/artifacts/" + got.GetArtifact().GetId() + "/"
	if got.GetArtifactPath() != want || got.GetArtifact().GetPath() != want || got.GetJobs()[0].GetArtifactPath() != want {
		t.Fatalf("after placement: experiment %q, artifact %q, job %q; want %q in each",
			got.GetArtifactPath(), got.GetArtifact().GetPath(), got.GetJobs()[0].GetArtifactPath(), want)
	}
}
