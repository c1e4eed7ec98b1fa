package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/cli"
	"github.com/falconhq/falcon/internal/output"
	"github.com/falconhq/falcon/internal/skillcheck"
	"github.com/falconhq/falcon/internal/xplane/xplanetest"
)

// skillNames are the skills issue 15 asks for; each must exist.
var skillNames = []string{"falcon", "submit-and-follow", "why-waiting", "results-out", "compare-runs", "profile", "interactive-debug"}

func loadSkills(t *testing.T) []*skillcheck.Skill {
	t.Helper()
	paths, err := filepath.Glob("../skills/*/SKILL.md")
	if err != nil {
		t.Fatal(err)
	}
	var skills []*skillcheck.Skill
	var names []string
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		rel := strings.TrimPrefix(p, "../")
		s, err := skillcheck.Parse(rel, data)
		if err != nil {
			t.Error(err)
			continue
		}
		if dir := filepath.Base(filepath.Dir(p)); s.Name != dir {
			t.Errorf("%s: front matter name %q, want its directory's name %q", rel, s.Name, dir)
		}
		skills = append(skills, s)
		names = append(names, s.Name)
	}
	for _, want := range skillNames {
		if !slices.Contains(names, want) {
			t.Errorf("no skill %q in skills/", want)
		}
	}
	return skills
}

// TestSkillsMatchTheCLI holds every `falcon ...` line of every skill to
// the command tree of this build: a skill naming a command or flag that
// does not exist, or a value that does not parse, fails here with its
// file, line and command.
func TestSkillsMatchTheCLI(t *testing.T) {
	checker := skillcheck.Checker{
		Root: cli.CommandTree,
		Values: map[string]func(string) error{
			"jq": func(v string) error { _, err := output.ParseQuery(v); return err },
		},
	}
	total := 0
	for _, s := range loadSkills(t) {
		cmds := s.Commands()
		if len(cmds) == 0 {
			t.Errorf("%s: no falcon commands in its shell blocks", s.Path)
		}
		if s.Script() == "" {
			t.Errorf("%s: no main path (a ```sh main block)", s.Path)
		}
		for _, c := range cmds {
			total++
			if err := checker.Check(c); err != nil {
				t.Errorf("%s:%d: %s: %v", s.Path, c.Line, c, err)
			}
		}
	}
	t.Logf("%d command lines checked", total)
}

// TestSkillsRunOnFalconDev runs each skill's main path as a bash script
// (set -euo pipefail) against a real falcon dev, with the falcon of this
// build first on PATH and the inputs its header asks for.
func TestSkillsRunOnFalconDev(t *testing.T) {
	skills := map[string]*skillcheck.Skill{}
	for _, s := range loadSkills(t) {
		skills[s.Name] = s
	}
	d := startDev(t, "")
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	okManifest := write("ok.yaml", "name: skill-ok\nexp_type: benchmark\nrole_to_task_spec:\n  main:\n    command: |\n      for i in $(seq 1 30); do echo \"{\\\"step\\\": $i, \\\"step_time\\\": 0.5}\" >> $FALCON_ARTIFACT_DIR/metrics.jsonl; done\n      echo done\n    replica: 1\n")
	failManifest := write("fail.yaml", "name: skill-fail\nrole_to_task_spec:\n  main: {command: 'echo boom >&2; exit 3', replica: 1}\n")
	slowManifest := write("slow.yaml", "name: skill-slow\nrole_to_task_spec:\n  main:\n    command: |\n      for i in $(seq 1 30); do echo \"{\\\"step\\\": $i, \\\"step_time\\\": 0.9}\" >> $FALCON_ARTIFACT_DIR/metrics.jsonl; done\n    replica: 1\n")
	interactive := write("debug.yaml", "name: skill-debug\ninteractive: true\nttl: 20m\nrole_to_task_spec:\n  main: {replica: 1}\n")

	runSkill := func(t *testing.T, name string, env ...string) result {
		t.Helper()
		s := skills[name]
		if s == nil {
			t.Fatalf("no skill %q", name)
		}
		cmd := exec.Command("bash", "-euo", "pipefail", "-c", s.Script())
		cmd.Env = append(os.Environ(), append([]string{
			"PATH=" + filepath.Dir(falconBin) + ":" + os.Getenv("PATH"),
			"FALCON_SERVER=http://" + d.http,
			"TMPDIR=" + dir,
		}, env...)...)
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		start := time.Now()
		err := cmd.Run()
		r := result{stdout: out.String(), stderr: errb.String()}
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			r.code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: exit %d in %s\nstdout:\n%s\nstderr:\n%s", name, r.code, time.Since(start).Round(time.Millisecond), r.stdout, r.stderr)
		return r
	}
	expect := func(t *testing.T, r result, code int, says ...string) {
		t.Helper()
		if r.code != code {
			t.Errorf("exit %d, want %d", r.code, code)
		}
		for _, s := range says {
			if !strings.Contains(r.stdout, s) {
				t.Errorf("stdout lacks %q", s)
			}
		}
	}

	t.Run("falcon", func(t *testing.T) { expect(t, runSkill(t, "falcon"), 0) })

	var okID string
	t.Run("submit-and-follow succeeds", func(t *testing.T) {
		r := runSkill(t, "submit-and-follow", "MANIFEST="+okManifest)
		expect(t, r, 0, "created exp-", " Succeeded ")
		okID = strings.Fields(strings.SplitN(r.stdout, "created ", 2)[1])[0]
	})
	t.Run("submit-and-follow reports the failure Reason", func(t *testing.T) {
		// Run twice: the manifest's name is taken after the first, and
		// --generate-name is what lets the same manifest run again.
		expect(t, runSkill(t, "submit-and-follow", "MANIFEST="+failManifest), 7, "main Failed JobFailed:")
		expect(t, runSkill(t, "submit-and-follow", "MANIFEST="+failManifest), 7, "main Failed JobFailed:")
	})
	if okID == "" {
		t.Fatal("no experiment to read results of")
	}
	t.Run("results-out", func(t *testing.T) {
		out := filepath.Join(dir, "results")
		expect(t, runSkill(t, "results-out", "EXP="+okID, "OUT="+out), 0, "step_time last=0.5", "metrics.jsonl ")
		if _, err := os.Stat(filepath.Join(out, "metrics.jsonl")); err != nil {
			t.Errorf("artifact get did not download metrics.jsonl: %v", err)
		}
	})
	t.Run("why-waiting", func(t *testing.T) {
		// An experiment that asks for an accelerator no cluster here has
		// waits; the skill names its reason and the clusters there are.
		e := d.create("name: skill-waits\nrole_to_task_spec:\n  main: {command: 'true', replica: 1}\n")
		expect(t, runSkill(t, "why-waiting", "EXP="+e["id"].(string)), 0, "clusters that could run", "local")
	})
	t.Run("compare-runs", func(t *testing.T) {
		slow := d.create(strings.Replace(mustRead(t, slowManifest), "skill-slow", "skill-slow-1", 1))
		d.waitFor(slow["id"].(string), "Succeeded", func(x map[string]any) bool { return x["status"] == "Succeeded" })
		expect(t, runSkill(t, "compare-runs", "BASELINE="+okID, "CANDIDATE="+slow["id"].(string)), 0, "step_time: regression", "regressed")
		same := d.create(strings.Replace(mustRead(t, okManifest), "skill-ok", "skill-ok-again", 1))
		d.waitFor(same["id"].(string), "Succeeded", func(x map[string]any) bool { return x["status"] == "Succeeded" })
		expect(t, runSkill(t, "compare-runs", "BASELINE="+okID, "CANDIDATE="+same["id"].(string)), 0, "no regression")
	})
	t.Run("profile", func(t *testing.T) {
		e := d.create("name: skill-prof\nrole_to_task_spec:\n  main: {command: 'true', replica: 1, device_type: v5p, device_topo: 2x2x1}\n")
		e = d.waitFor(e["id"].(string), "ended", func(x map[string]any) bool { return x["status"] == "Succeeded" || x["status"] == "Failed" })
		pdir := filepath.Join(strings.TrimPrefix(e["artifact_path"].(string), "file://"), "plugins", "profile", "2026_12_01_12_00_00")
		if err := os.MkdirAll(pdir, 0o755); err != nil {
			t.Fatal(err)
		}
		s := xplanetest.TPUSteps()
		s.Steps, s.Repeat, s.Variants = 5, 4, 2
		if _, err := xplanetest.WriteSynthetic(filepath.Join(pdir, "host0.xplane.pb"), s); err != nil {
			t.Fatal(err)
		}
		expect(t, runSkill(t, "profile", "EXP="+e["id"].(string)), 0, "analysis ana-", "steps=5", "mfu=0.", "self=")
	})
	t.Run("interactive-debug leaves nothing running", func(t *testing.T) {
		r := runSkill(t, "interactive-debug", "MANIFEST="+interactive)
		expect(t, r, 0, "rank=0", "probe")
		back, err := os.ReadFile(filepath.Join(dir, "falcon-probe.back"))
		if err != nil || string(back) != "probe\n" {
			t.Errorf("copied back %q, %v", back, err)
		}
		live := d.mustJSON("exp", "list", "--name", "skill-debug*", "--status", "running")
		if items, _ := live["items"].([]any); len(items) != 0 {
			t.Errorf("the skill left %d interactive experiments running", len(items))
		}
	})
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
