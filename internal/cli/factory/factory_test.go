package factory

import (
	"errors"
	"strings"
	"testing"

	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
)

func TestParseStatus(t *testing.T) {
	for _, in := range []string{"running", "RUNNING", "Running", " running "} {
		got, err := ParseStatus("--status", lifecycle.ExperimentMachine, in)
		if err != nil || got != "Running" {
			t.Errorf("ParseStatus(%q) = %q, %v; want Running", in, got, err)
		}
	}
	_, err := ParseStatus("--status", lifecycle.ExperimentMachine, "done")
	if !errors.Is(err, errdefs.ErrInvalid) {
		t.Fatalf("ParseStatus(done) error = %v, want invalid", err)
	}
	want := `--status: unknown experiment status "done"; allowed: Created, Running, Succeeded, Failed, Aborting, Aborted`
	if err.Error() != want {
		t.Errorf("error = %q\nwant    %q", err, want)
	}
}

func TestConfirmOrRequireYes(t *testing.T) {
	tests := []struct {
		name      string
		yes       bool
		stdinTTY  bool
		answer    string
		want      bool
		wantErr   bool
		wantAsked bool
	}{
		{name: "--yes skips the prompt", yes: true, want: true},
		{name: "--yes without a terminal", yes: true, stdinTTY: false, want: true},
		{name: "terminal, answered y", stdinTTY: true, answer: "y\n", want: true, wantAsked: true},
		{name: "terminal, answered no", stdinTTY: true, answer: "n\n", want: false, wantAsked: true},
		{name: "terminal, empty answer defaults to no", stdinTTY: true, answer: "\n", want: false, wantAsked: true},
		{name: "no terminal and no --yes is refused", stdinTTY: false, answer: "y\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ios, in, _, errOut := iostreams.Test()
			ios.SetStdinTTY(tt.stdinTTY)
			in.WriteString(tt.answer)
			got, err := ConfirmOrRequireYes(ios, tt.yes, "Abort?")
			if tt.wantErr {
				if !errors.Is(err, errdefs.ErrInvalid) || !strings.Contains(err.Error(), "--yes") {
					t.Fatalf("err = %v, want an invalid-argument error naming --yes", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("confirmed = %v, want %v", got, tt.want)
			}
			if asked := strings.Contains(errOut.String(), "[y/N]"); asked != tt.wantAsked {
				t.Errorf("asked = %v, want %v", asked, tt.wantAsked)
			}
		})
	}
}
