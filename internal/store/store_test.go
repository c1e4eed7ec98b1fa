package store_test

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/falconhq/falcon/internal/store"
)

// TaskSpec is stored as JSON, so its encoding is a storage format: rows
// written before a field existed must still read, and a task without the new
// field must be stored exactly as before.
func TestTaskSpecJSON(t *testing.T) {
	tests := []struct {
		name string
		row  string // as stored
		spec store.TaskSpec
	}{
		{
			name: "a task without resources is stored as before they existed",
			row:  `{"command":"run","replica":1,"device_type":"v7x"}`,
			spec: store.TaskSpec{Command: "run", Replica: 1, DeviceType: "v7x"},
		},
		{
			name: "resources",
			row:  `{"command":"run","replica":1,"device_type":"cpu","resources":{"requests":{"cpu":"2","memory":"4Gi"},"limits":{"memory":"8Gi"}}}`,
			spec: store.TaskSpec{Command: "run", Replica: 1, DeviceType: "cpu", Resources: &store.Resources{
				Requests: map[string]string{"cpu": "2", "memory": "4Gi"},
				Limits:   map[string]string{"memory": "8Gi"},
			}},
		},
		{
			name: "limits only",
			row:  `{"command":"run","replica":1,"resources":{"limits":{"cpu":"500m"}}}`,
			spec: store.TaskSpec{Command: "run", Replica: 1, Resources: &store.Resources{Limits: map[string]string{"cpu": "500m"}}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got store.TaskSpec
			if err := json.Unmarshal([]byte(tt.row), &got); err != nil {
				t.Fatalf("Unmarshal: %v", err)
			}
			if diff := cmp.Diff(tt.spec, got); diff != "" {
				t.Errorf("read (-want +got):\n%s", diff)
			}
			b, err := json.Marshal(tt.spec)
			if err != nil {
				t.Fatalf("Marshal: %v", err)
			}
			if string(b) != tt.row {
				t.Errorf("stored as\n%s\nwant\n%s", b, tt.row)
			}
		})
	}
}
