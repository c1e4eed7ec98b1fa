package version

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/falconhq/falcon/internal/cli/clitest"
	"github.com/falconhq/falcon/internal/output"
)

func TestVersion(t *testing.T) {
	info := Info{Version: "v1.2.3", Commit: "abc123", GoVersion: "go1.26.8", Platform: "linux/amd64"}
	run := func(format output.Format) string {
		// No server: version must not need one.
		f, s := clitest.NewFactory(t, clitest.DownURL(t), format)
		cmd := NewCmdVersion(f, func(ctx context.Context, o *Options) error {
			o.Info = func() Info { return info }
			return versionRun(ctx, o)
		})
		if err := clitest.Execute(cmd); err != nil {
			t.Fatal(err)
		}
		return s.Out.String()
	}
	if got := run(output.Table); got != "falcon v1.2.3 (abc123) go1.26.8 linux/amd64\n" {
		t.Errorf("table = %q", got)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(run(output.JSON)), &got); err != nil {
		t.Fatal(err)
	}
	if got["version"] != "v1.2.3" || got["commit"] != "abc123" || got["go_version"] != "go1.26.8" || got["platform"] != "linux/amd64" {
		t.Errorf("json = %v", got)
	}
	if v := Current().Version; v == "" {
		t.Error("Current().Version is empty")
	}
}
