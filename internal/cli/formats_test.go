package cli

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/cli/credentials"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	expctl "github.com/falconhq/falcon/internal/controller/exp"
	"github.com/falconhq/falcon/internal/testenv/apitest"
)

// TestEveryCommandSpeaksEveryFormat runs each client command against a real
// API server in table, JSON and YAML, and checks JSON and YAML are whole
// documents a script can parse.
func TestEveryCommandSpeaksEveryFormat(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	url := "http://" + env.HTTPAddr
	ctx := context.Background()
	dir := t.TempDir()
	ctl := expctl.New(env.Conn)

	// One finished experiment to read, with a log line on disk.
	done := env.Create(t, "formats-done", map[string]*falconv1.TaskSpec{"w": {Command: "true", Replica: 1}})
	job := done.GetJobs()[0].GetId()
	logFile := filepath.Join(env.Dir, "logs", job, job+"-0.log")
	artDir := strings.TrimPrefix(done.GetArtifactPath(), "file://")
	for _, to := range []string{"Running", "Succeeded"} {
		from := map[string]string{"Running": "Pending", "Succeeded": "Running"}[to]
		if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: job, ExpectedStatus: from, Status: to}); err != nil {
			t.Fatal(err)
		}
		if to == "Running" {
			// What the job writes, before it ends: its results are read
			// for the last time when it does.
			writeFile(t, mkdirFor(t, logFile), "hello from rank 0\n")
			writeFile(t, mkdirFor(t, filepath.Join(artDir, "metrics.jsonl")), `{"step": 1, "loss": 0.5}`+"\n")
		}
	}
	// One live experiment per format, for a forced abort.
	forceable := map[string]string{}
	for _, format := range []string{"table", "json", "yaml"} {
		forceable[format] = env.Create(t, "formats-force-"+format, map[string]*falconv1.TaskSpec{"w": {Command: "true", Replica: 1}}).GetId()
	}
	// One aborted experiment per format, for delete.
	deletable := map[string]string{}
	for _, format := range []string{"table", "json", "yaml"} {
		x := env.Create(t, "formats-del-"+format, map[string]*falconv1.TaskSpec{"w": {Command: "true", Replica: 1}})
		if _, err := env.Exps.AbortExp(ctx, &falconv1.AbortExpRequest{Id: x.GetId()}); err != nil {
			t.Fatal(err)
		}
		if _, err := env.Jobs.UpdateJobStatus(ctx, &falconv1.UpdateJobStatusRequest{Id: x.GetJobs()[0].GetId(), ExpectedStatus: "Aborting", Status: "Aborted"}); err != nil {
			t.Fatal(err)
		}
		deletable[format] = x.GetId()
	}
	if err := ctl.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if got := env.Exp(t, done.GetId()).GetStatus(); got != "Succeeded" {
		t.Fatalf("setup: experiment %s, want Succeeded", got)
	}
	// A second experiment with the same metric, for compare.
	other := env.Create(t, "formats-other", map[string]*falconv1.TaskSpec{"w": {Command: "false", Replica: 2}})
	writeFile(t, mkdirFor(t, filepath.Join(strings.TrimPrefix(other.GetArtifactPath(), "file://"), "metrics.jsonl")), `{"step": 1, "loss": 0.6}`+"\n")

	manifest := filepath.Join(dir, "exp-%s.yaml")
	for _, format := range []string{"table", "json", "yaml"} {
		writeFile(t, strings.Replace(manifest, "%s", format, 1),
			"name: formats-new-"+format+"\nrole_to_task_spec:\n  w: {command: echo hi, replica: 1}\n")
	}
	clusters := filepath.Join(dir, "clusters.yaml")
	writeFile(t, clusters, "clusters:\n  lab:\n    provider: kubernetes\n    kubeconfig: /nonexistent/kubeconfig\n    context: lab\n")

	// {exp}, {job}, {del}, {force} and {fmt} are filled in per run.
	commands := [][]string{
		{"exp", "validate", "-f", strings.Replace(manifest, "%s", "{fmt}", 1)}, // before create takes the name
		{"exp", "create", "-f", strings.Replace(manifest, "%s", "{fmt}", 1)},
		{"exp", "get", "{exp}"},
		{"exp", "list"},
		{"exp", "logs", "{exp}"},
		{"exp", "wait", "{exp}"},
		{"exp", "events", "{exp}"},
		{"exp", "explain", "{exp}"},
		{"exp", "get", "{exp}", "-w"},               // it has ended: printed once
		{"exp", "extend", "{force}", "--ttl", "1h"}, // before it is aborted
		{"exp", "abort", "{exp}", "--yes"},
		{"exp", "abort", "{force}", "--force", "--yes"},
		{"exp", "delete", "{del}", "--yes"},
		{"exp", "metrics", "{exp}", "--series", "loss"},
		{"exp", "diff", "{exp}", "{other}"},
		{"exp", "compare", "{exp}", "{other}"},
		{"analyze", "accuracy", "{exp}", "{other}", "--no-wait"}, // queued; no analysis controller runs here
		{"analyze", "profile", "{exp}", "--no-wait"},
		{"analyze", "compare", "{exp}", "{other}", "--no-wait"},
		{"report", "ls", "{exp}"},
		{"exp", "logs", "export", "{exp}", "--to", "file://" + filepath.Join(dir, "export-{fmt}")},
		{"artifact", "ls", "{exp}"},
		{"artifact", "get", "{exp}", "--to", filepath.Join(dir, "get-{fmt}")},
		{"job", "list"},
		{"job", "get", "{job}"},
		{"cluster", "create", "--name", "lab-{fmt}", "--backend", "local"},
		{"cluster", "apply", "-f", clusters, "--dry-run"},
		{"cluster", "list"},
		{"cluster", "get", "local"},
		{"cluster", "set-status", "lab-{fmt}", "maintenance"},
		{"cluster", "status"},
		{"cluster", "status", "local"},
		{"auth", "status"},
		{"audit", "list"},
		{"user", "list"},
		{"user", "relink", auth.LocalUser().Email, "--sub", auth.LocalUser().UserID}, // already linked: changes nothing
		{"config", "set-context", "lab-{fmt}", "--server", url},
		{"config", "use-context", "lab-{fmt}"},
		{"config", "get-contexts"},
		{"version"},
		{"sim", "--trace", filepath.Join("..", "sim", "testdata", "day.jsonl"), "--policy", "spec", "--policy", "linger=15m"}, // local: no server
	}
	covered := map[string]bool{}
	for _, format := range []string{"table", "json", "yaml"} {
		for _, c := range commands {
			args := make([]string, 0, len(c)+2)
			for _, a := range c {
				a = strings.NewReplacer("{exp}", done.GetId(), "{job}", job, "{del}", deletable[format], "{force}", forceable[format], "{other}", other.GetId(), "{fmt}", format).Replace(a)
				args = append(args, a)
			}
			args = append(args, "-o", format)
			name := strings.Join(args, " ")
			t.Run(name, func(t *testing.T) {
				ios, _, stdout, stderr := iostreams.Test()
				env := map[string]string{ServerEnv: url, credentials.ConfigDirEnv: dir}
				if args[0] == "auth" {
					env[credentials.TokenEnv] = unsignedToken // read, never sent
				}
				code := run(ctx, args, ios, func(k string) string { return env[k] })
				r := result{code, stdout.String(), stderr.String()}
				if r.code != 0 {
					t.Fatalf("exit %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
				}
				out := strings.TrimSpace(r.stdout)
				if out == "" {
					t.Fatalf("printed nothing (stderr: %s)", r.stderr)
				}
				switch format {
				case "json":
					// One document, or one per line for streams (logs).
					for _, line := range jsonDocs(r.stdout) {
						var v any
						if err := json.Unmarshal([]byte(line), &v); err != nil {
							t.Fatalf("not JSON (%v):\n%s", err, r.stdout)
						}
						if _, ok := v.(map[string]any); !ok {
							t.Fatalf("JSON is not an object:\n%s", r.stdout)
						}
					}
				case "yaml":
					var v any
					if err := yaml.Unmarshal([]byte(r.stdout), &v); err != nil {
						t.Fatalf("not YAML (%v):\n%s", err, r.stdout)
					}
					if _, ok := v.(map[string]any); !ok {
						t.Fatalf("YAML is not a mapping:\n%s", r.stdout)
					}
				case "table":
					if strings.HasPrefix(out, "{") {
						t.Fatalf("table output is JSON:\n%s", r.stdout)
					}
				}
			})
		}
	}
	for _, c := range commands {
		covered["falcon "+leadingWords(c)] = true
	}

	// Every client command is covered above or listed in notADocument.
	ios, _, _, _ := iostreams.Test()
	f, g := newFactory(ios, func(string) string { return "" })
	var missing []string
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if c.HasSubCommands() {
			for _, sub := range c.Commands() {
				walk(sub)
			}
			return
		}
		p := c.CommandPath()
		if !c.Runnable() || c.Hidden || p == "falcon help" || covered[p] || notADocument[p] != "" {
			return
		}
		missing = append(missing, p)
	}
	walk(newCmdRoot(f, g, func(string) string { return "" }))
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("commands with no output-format coverage (add them above, or to notADocument with the reason): %s", strings.Join(missing, ", "))
	}
}

// unsignedToken is a JWT whose claims `auth status` shows: alice, expiring
// in 2100. Its signature is garbage; no server sees it.
var unsignedToken = b64(`{"alg":"RS256","kid":"k"}`) + "." + b64(`{"email":"alice@example.com","sub":"u-1","exp":4102444800}`) + ".c2ln"

func b64(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

// leadingWords is a command line's command path: its words before the first
// flag or argument that is not a subcommand name.
func leadingWords(args []string) string {
	var words []string
	for _, a := range args {
		if strings.HasPrefix(a, "-") || strings.ContainsAny(a, "{/.") || strings.Contains(a, "local") {
			break
		}
		words = append(words, a)
	}
	return strings.Join(words, " ")
}

// jsonDocs splits output into its JSON documents: a single (possibly
// indented) document, or one compact document per line.
func jsonDocs(out string) []string {
	out = strings.TrimSpace(out)
	if strings.HasPrefix(out, "{\n") || !strings.Contains(out, "\n") {
		return []string{out}
	}
	return strings.Split(out, "\n")
}

func mkdirFor(t *testing.T, path string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}
