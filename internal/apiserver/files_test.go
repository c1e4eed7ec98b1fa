package apiserver_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// An artifact of many files lists in full, page by page, in path order;
// FALCON_LIST_FILES sets how many (10^5 in make bench, 2*10^4 here).
func TestListManyArtifactFiles(t *testing.T) {
	n := 20000
	if v := os.Getenv("FALCON_LIST_FILES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	ctx := context.Background()
	env := apitest.Start(t, map[string]string{"local": "local"})
	exp := env.Create(t, "many-files", map[string]*falconv1.TaskSpec{"w": {Command: "true", Replica: 1}})
	dir := strings.TrimPrefix(exp.GetArtifactPath(), "file://")
	for i := range n {
		p := filepath.Join(dir, fmt.Sprintf("shard-%03d", i%100), fmt.Sprintf("f%06d", i))
		if i < 100 {
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(p, []byte(strconv.Itoa(i)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	arts := falconv1.NewArtifactServiceClient(env.UserConn)
	start := time.Now()
	req := &falconv1.ListArtifactFilesRequest{ExpId: exp.GetId(), PageSize: 1000}
	var got, last string
	count := 0
	for {
		resp, err := arts.ListArtifactFiles(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range resp.GetItems() {
			if f.GetPath() <= last {
				t.Fatalf("%q after %q: not in path order", f.GetPath(), last)
			}
			last = f.GetPath()
			count++
		}
		if resp.GetNextPageToken() == "" {
			break
		}
		req.PageToken = resp.GetNextPageToken()
	}
	got = last
	if count != n || got != fmt.Sprintf("shard-099/f%06d", n-1) {
		t.Errorf("listed %d files ending %q; want %d", count, got, n)
	}
	t.Logf("%d files indexed and listed in %v", n, time.Since(start))
}
