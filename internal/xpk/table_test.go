package xpk_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/xpk"
)

func TestParseList(t *testing.T) {
	tests := []struct {
		name    string
		out     string
		want    map[string]xpk.State
		wantErr string
	}{
		{
			name: "xpk's golden output of an empty cluster: a header alone",
			out: "[XPK] Starting xpk v0.0.0\n[XPK] Workload List Output:\n" +
				"Jobset Name   Created Time   Priority   TPU VMs Needed   TPU VMs Running/Ran   TPU VMs Done   Status   Status Message   Status Time\n" +
				"[XPK] See your workloads in Cloud Console: https://console.cloud.google.com/kubernetes/aiml/deployments/jobs?project=golden-project\n[XPK] Exiting XPK cleanly\n",
			want: map[string]xpk.State{},
		},
		{
			name: "the current release prints nothing for no workloads",
			out:  "[XPK] Workload List Output:\n\n[XPK] Exiting XPK cleanly\n",
			want: map[string]xpk.State{},
		},
		{
			name: "a row wider than the header pads every column",
			out: "[XPK] Workload List Output:\n" +
				"Jobset Name      Created Time           Priority   TPU VMs Needed   TPU VMs Running/Ran   TPU VMs Done   Status     Status Message                           Status Time         \n" +
				"falcon-job-abc   2026-12-01T09:00:00Z   high       2                2                     <none>         Admitted   Admitted by ClusterQueue cluster-queue   2026-12-01T09:00:05Z\n",
			want: map[string]xpk.State{"falcon-job-abc": xpk.StateRunning},
		},
		{
			name:    "no marker line",
			out:     "[XPK] Starting xpk\nsomething else\n",
			wantErr: `it has no line "[XPK] Workload List Output:"`,
		},
		{
			name:    "a table that is not xpk's",
			out:     "[XPK] Workload List Output:\nNAME   STATUS\nfoo    Running\n",
			wantErr: `lacks the column(s) "Jobset Name"`,
		},
		{
			name: "a row that does not line up",
			out: "[XPK] Workload List Output:\n" +
				"Jobset Name   Created Time   Priority   TPU VMs Needed   TPU VMs Running/Ran   TPU VMs Done   Status   Status Message   Status Time\n" +
				"a-very-long-workload-name 2026 medium 1 1 1 Finished x y\n",
			wantErr: "does not line up with the header",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := xpk.ParseList("c", tt.out)
			if tt.wantErr != "" {
				var oe *xpk.OutputError
				if !errors.As(err, &oe) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseList = %v, want an OutputError containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			states := map[string]xpk.State{}
			for _, w := range got {
				states[w.Name] = w.State
			}
			if diff := cmp.Diff(tt.want, states); diff != "" {
				t.Errorf("states (-want +got):\n%s", diff)
			}
		})
	}
}

// The rows of xpk's README example (an older release, with a TPU Slice
// Dimensions column) read as xpk's own filters name them.
func TestParseListReadme(t *testing.T) {
	rows := [][]string{
		{"Jobset Name", "Created Time", "Priority", "TPU VMs Needed", "TPU VMs Running/Ran", "TPU VMs Done", "TPU Slice Dimensions", "Status", "Status Message", "Status Time"},
		{"user-first-job-failed", "2023-1-1T1:00:00Z", "medium", "4", "4", "<none>", "2xv4-8", "Finished", "JobSet failed", "2023-1-1T1:05:00Z"},
		{"user-second-job-success", "2023-1-1T1:10:00Z", "medium", "4", "4", "4", "2xv4-8", "Finished", "JobSet finished successfully", "2023-1-1T1:14:00Z"},
		{"user-third-job-running", "2023-1-1T1:15:00Z", "medium", "4", "4", "<none>", "2xv4-8", "Admitted", "Admitted by ClusterQueue cluster-queue", "2023-1-1T1:16:00Z"},
		{"user-forth-job-in-queue", "2023-1-1T1:16:05Z", "medium", "4", "<none>", "<none>", "2xv4-8", "Admitted", "couldn't assign flavors to pod set slice-job: insufficient unused quota for google.com/tpu in flavor 2xv4-8, 4 more needed", "2023-1-1T1:16:10Z"},
		{"user-fifth-job-in-queue-preempted", "2023-1-1T1:10:05Z", "low", "4", "<none>", "<none>", "2xv4-8", "Evicted", "Preempted to accommodate a higher priority Workload", "2023-1-1T1:10:00Z"},
	}
	got, err := xpk.ParseList("c", "[XPK] Starting xpk\n[XPK] Workload List Output:\n"+align(rows)+"\n[XPK] Exiting XPK cleanly\n")
	if err != nil {
		t.Fatal(err)
	}
	want := []xpk.State{xpk.StateFailed, xpk.StateCompleted, xpk.StateRunning, xpk.StateQueued, xpk.StateQueued}
	var states []xpk.State
	for _, w := range got {
		states = append(states, w.State)
	}
	if diff := cmp.Diff(want, states); diff != "" {
		t.Errorf("states (-want +got):\n%s", diff)
	}
	if got[1].VMsDone != 4 || got[0].VMsDone != -1 || got[3].VMsRunning != -1 || got[3].StatusTime != "2023-1-1T1:16:10Z" {
		t.Errorf("rows %+v: want <none> as -1 and every column in place", got)
	}
}

// align renders rows as xpk does: each column padded to its widest cell,
// three spaces apart.
func align(rows [][]string) string {
	widths := make([]int, len(rows[0]))
	for _, r := range rows {
		for i, c := range r {
			widths[i] = max(widths[i], len(c))
		}
	}
	var lines []string
	for _, r := range rows {
		var cells []string
		for i, c := range r {
			cells = append(cells, c+strings.Repeat(" ", widths[i]-len(c)))
		}
		lines = append(lines, strings.Join(cells, "   "))
	}
	return strings.Join(lines, "\n")
}
