package exitcode_test

import (
	"testing"

	"github.com/falconhq/falcon/internal/exitcode"
)

func TestKilled(t *testing.T) {
	tests := []struct {
		code int
		want string
	}{
		{0, ""},
		{1, ""},
		{127, ""},
		{128, ""},
		{130, "killed by SIGINT"},
		{137, "killed by SIGKILL"},
		{139, "killed by SIGSEGV"},
		{143, "killed by SIGTERM"},
		{255, ""},
		{-1, ""},
	}
	for _, tt := range tests {
		if got := exitcode.Killed(tt.code); got != tt.want {
			t.Errorf("Killed(%d) = %q, want %q", tt.code, got, tt.want)
		}
	}
}
