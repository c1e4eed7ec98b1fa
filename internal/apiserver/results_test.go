package apiserver_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/changefeed"
	expctl "github.com/falconhq/falcon/internal/controller/exp"
	"github.com/falconhq/falcon/internal/testenv/apitest"
	"github.com/falconhq/falcon/internal/testenv/gcstest"
)

// TestWritesThatEndAnExperimentSayItEnded: every write that leaves an
// experiment in a terminal status marks its change Ended on the feed, which
// is what has the server read its results one last time at once; writes
// that leave it live do not.
func TestWritesThatEndAnExperimentSayItEnded(t *testing.T) {
	feed := changefeed.New()
	env := apitest.Start(t, map[string]string{"local": "local"}, apiserver.WithFeed(feed))
	ctx := context.Background()
	spec := map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}
	ended := func(id string) (live, end int) {
		changes, _ := feed.Since(0)
		for _, c := range changes {
			if c.Kind == "experiment" && c.ID == id {
				if c.Ended {
					end++
				} else {
					live++
				}
			}
		}
		return live, end
	}
	jobTo := func(exp *falconv1.Experiment, from, to string) {
		t.Helper()
		if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: exp.GetJobs()[0].GetId(), ExpectedStatus: from, Status: to}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("an abort leaves it Aborting", func(t *testing.T) {
		exp := env.Create(t, "abort", spec)
		if _, err := env.Exps.AbortExp(ctx, &falconv1.AbortExpRequest{Id: exp.GetId()}); err != nil {
			t.Fatal(err)
		}
		if live, end := ended(exp.GetId()); end != 0 || live == 0 {
			t.Errorf("%d changes Ended, %d not; want none Ended", end, live)
		}
	})
	t.Run("a forced abort ends it", func(t *testing.T) {
		exp := env.Create(t, "force", spec)
		if _, err := env.Exps.AbortExp(ctx, &falconv1.AbortExpRequest{Id: exp.GetId(), Force: true}); err != nil {
			t.Fatal(err)
		}
		if _, end := ended(exp.GetId()); end != 1 {
			t.Errorf("%d changes Ended; want 1", end)
		}
	})
	t.Run("its last job's end ends it", func(t *testing.T) {
		exp := env.Create(t, "ends", spec)
		jobTo(exp, "Pending", "Running")
		if _, end := ended(exp.GetId()); end != 0 {
			t.Fatalf("Running: %d changes Ended; want none", end)
		}
		jobTo(exp, "Running", "Failed")
		// Whichever of the job's write and the expController's batch
		// moves the experiment, one change says it ended.
		if err := expctl.New(env.Conn).Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
		got, err := env.Exps.GetExp(ctx, &falconv1.GetExpRequest{Id: exp.GetId()})
		if err != nil {
			t.Fatal(err)
		}
		if _, end := ended(exp.GetId()); got.GetStatus() != "Failed" || end == 0 {
			t.Errorf("experiment %s, %d changes Ended; want Failed and at least 1", got.GetStatus(), end)
		}
	})
}

// TestStoppedPodsFilesAreKept: an experiment whose pods Falcon stopped on a
// Kubernetes cluster is read at once when it ends, but its index is
// complete only after the pods' grace period, so that what they write
// while they terminate (a last profile) is listed too. Its files are in
// the cluster's bucket, where the pods write (GCS FUSE).
func TestStoppedPodsFilesAreKept(t *testing.T) {
	const grace = 3 * time.Second
	gcs := gcstest.Start(t, "", "results")
	blobs := blobstore.NewOpener(blobstore.WithGCSOptions(gcs.ClientOptions()...))
	t.Cleanup(func() { blobs.Close() })
	env := apitest.Start(t, map[string]string{"k8s": "kubernetes"}, apiserver.WithStopGrace(grace), apiserver.WithBlobs(blobs))
	ctx := context.Background()
	c, err := env.Store.GetCluster(ctx, "k8s")
	if err != nil {
		t.Fatal(err)
	}
	c.GCSBucket = "results"
	if _, err := env.Store.UpsertCluster(ctx, c); err != nil {
		t.Fatal(err)
	}
	exp, err := env.Exps.CreateExp(ctx, &falconv1.CreateExpRequest{Experiment: &falconv1.Experiment{
		Name: "stopped", ClusterName: "k8s", RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1, Image: "img"}}}})
	if err != nil {
		t.Fatal(err)
	}
	loc, err := blobstore.Parse("artifact", exp.GetArtifactPath())
	if err != nil || loc.Scheme != "gs" {
		t.Fatalf("artifact path %q (%v); want the cluster's bucket", exp.GetArtifactPath(), err)
	}
	write := func(name string) {
		t.Helper()
		w, err := blobs.Writer(ctx, loc, name, "")
		if err != nil {
			t.Fatal(err)
		}
		w.Write([]byte(name))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: exp.GetJobs()[0].GetId(), ExpectedStatus: "Pending", Status: "Running"}); err != nil {
		t.Fatal(err)
	}
	write("before-the-abort")
	if _, err := env.Exps.AbortExp(ctx, &falconv1.AbortExpRequest{Id: exp.GetId(), Force: true}); err != nil {
		t.Fatal(err)
	}
	art := func() *falconv1.Artifact { return env.Exp(t, exp.GetId()).GetArtifact() }
	// Read at once, not final: the pod may still write.
	waitFor(t, "the file written before the abort indexed", func() bool { return art().GetFileCount() == 1 })
	if a := art(); a.GetIndexComplete() {
		t.Fatalf("index complete %s after the end, within the pods' grace period", time.Since(a.GetUpdatedAt().AsTime()))
	}
	write("while-terminating")
	waitFor(t, "the index complete", func() bool { return art().GetIndexComplete() })
	if n := art().GetFileCount(); n != 2 {
		t.Errorf("complete index holds %d files; want both", n)
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// The server's address opened in a browser is the dashboard.
func TestRootIsTheDashboard(t *testing.T) {
	env := apitest.Start(t, nil)
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Get("http://" + env.HTTPAddr + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/ui/" {
		t.Errorf("GET /: %s, Location %q; want 302 to /ui/", resp.Status, resp.Header.Get("Location"))
	}
	// Only the root: other paths are still the API's.
	resp, err = c.Get("http://" + env.HTTPAddr + "/nothing-here")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nothing-here: %s; want 404", resp.Status)
	}
}
