package resourcemanager

import (
	"testing"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

func TestQueueKey(t *testing.T) {
	tests := []struct {
		name string
		task *falconv1.TaskSpec
		want string
	}{
		{"tpu generation and topology, lower-cased like pool labels", &falconv1.TaskSpec{DeviceType: "tpu7x", DeviceTopo: "2X2X4"}, "v7x:2x2x4"},
		{"another tpu generation of the same topology queues apart", &falconv1.TaskSpec{DeviceType: "v6e", DeviceTopo: "2x2x4"}, "v6e:2x2x4"},
		{"gpu with its default count", &falconv1.TaskSpec{DeviceType: "h100"}, "nvidia-h100-80gb:8"},
		{"gpu with an explicit count", &falconv1.TaskSpec{DeviceType: "H100-80GB", DeviceCount: 4}, "nvidia-h100-80gb:4"},
		{"gpu of another type", &falconv1.TaskSpec{DeviceType: "l4", DeviceCount: 1}, "nvidia-l4:1"},
		{"no device type", &falconv1.TaskSpec{}, "cpu"},
		{"cpu named", &falconv1.TaskSpec{DeviceType: "CPU"}, "cpu"},
		{"unknown type keeps to itself", &falconv1.TaskSpec{DeviceType: "Gaudi3"}, "gaudi3"},
		{"unknown type with a topology", &falconv1.TaskSpec{DeviceType: "tpu9", DeviceTopo: "4x4"}, "tpu9:4x4"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := queueKey(&falconv1.Job{TaskSpec: tt.task}); got != tt.want {
				t.Errorf("queueKey = %q, want %q", got, tt.want)
			}
		})
	}
}
