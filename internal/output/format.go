package output

import (
	"fmt"
	"strings"
)

// Format is an output format chosen with -o/--output.
type Format string

const (
	Table Format = "table"
	JSON  Format = "json"
	YAML  Format = "yaml"
	// Markdown renders tables as Markdown, for pasting into a review or
	// an issue; views without a table print as they do for table.
	Markdown Format = "md"
	// Wide is table with the columns that do not fit a narrow terminal,
	// above all each row's Message (why a job waits or failed).
	Wide Format = "wide"
	// Name prints only what identifies each resource printed, one per
	// line (an experiment's or job's ID, a cluster's name), for xargs and
	// shell loops.
	Name Format = "name"
)

// Formats lists the accepted formats in the order help text shows them.
var Formats = []Format{Table, Wide, JSON, YAML, Markdown, Name}

// FormatNames are the accepted formats' names, for completion and help.
func FormatNames() []string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return names
}

// ParseFormat accepts a format name case-insensitively.
func ParseFormat(s string) (Format, error) {
	for _, f := range Formats {
		if strings.EqualFold(s, string(f)) {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown output format %q; allowed: %s", s, formatNames())
}

func formatNames() string { return strings.Join(FormatNames(), ", ") }

// FormatFlag is a pflag.Value for -o/--output. Its zero value means the user
// chose nothing, so the caller can pick a default that depends on the
// terminal; an unknown name fails while flags are parsed, before any command
// runs.
type FormatFlag struct {
	Value Format
}

func (f *FormatFlag) String() string { return string(f.Value) }

// Set implements pflag.Value.
func (f *FormatFlag) Set(s string) error {
	v, err := ParseFormat(s)
	if err != nil {
		return fmt.Errorf("must be one of %s", formatNames())
	}
	f.Value = v
	return nil
}

// Type implements pflag.Value; help shows it as the value's placeholder.
func (f *FormatFlag) Type() string { return "format" }
