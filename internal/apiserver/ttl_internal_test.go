package apiserver

import (
	"testing"
	"time"
)

func TestTimeLeft(t *testing.T) {
	tests := []struct {
		left time.Duration
		want string
	}{
		{9*time.Minute + 59*time.Second, "10m"},
		{9*time.Minute + 29*time.Second, "9m"},
		{time.Hour + 30*time.Second, "1h1m"},
		{time.Minute, "1m"},
		{59*time.Second + 600*time.Millisecond, "1m"},
		{29*time.Second + 990*time.Millisecond, "30s"},
		{300 * time.Millisecond, "1s"},
	}
	for _, tt := range tests {
		if got := timeLeft(tt.left); got != tt.want {
			t.Errorf("timeLeft(%s) = %q, want %q", tt.left, got, tt.want)
		}
	}
}
