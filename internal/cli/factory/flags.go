package factory

import (
	"errors"
	"fmt"
	"strings"

	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/lifecycle"
)

// ParseStatus reads a status flag: scripts write succeeded, SUCCEEDED or
// Succeeded, and the API wants the canonical "Succeeded", so the value is
// matched case-insensitively against the machine's statuses. Unknown values
// are InvalidArgument errors listing what is allowed.
func ParseStatus(flag string, m lifecycle.Machine, value string) (string, error) {
	var names []string
	for _, s := range m.Statuses() {
		if strings.EqualFold(string(s), strings.TrimSpace(value)) {
			return string(s), nil
		}
		names = append(names, string(s))
	}
	return "", errdefs.Invalid(flag, "unknown %s status %q; allowed: %s", m.Kind, value, strings.Join(names, ", "))
}

// ParseStatuses applies ParseStatus to each value.
func ParseStatuses(flag string, m lifecycle.Machine, values []string) ([]string, error) {
	out := make([]string, 0, len(values))
	for _, v := range values {
		s, err := ParseStatus(flag, m, v)
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// ReadFlagFile reads the file named by a flag ("-" is stdin). A file that
// cannot be read is bad input, reported against the flag.
func ReadFlagFile(ios *iostreams.IOStreams, flag, path string) ([]byte, error) {
	data, err := ios.ReadInput(path)
	if err != nil {
		return nil, errdefs.Invalid(flag, "%v", err)
	}
	return data, nil
}

// InFile attributes err, typically a manifest's field errors, to the file
// they were found in; "-" is shown as <stdin>. Several field errors are
// listed one per line, which reads better than one long line.
func InFile(path string, err error) error {
	if err == nil {
		return nil
	}
	if path == "-" {
		path = "<stdin>"
	}
	return &fileError{path: path, err: err}
}

type fileError struct {
	path string
	err  error
}

func (e *fileError) Unwrap() error { return e.err }

func (e *fileError) Error() string {
	var fe errdefs.FieldErrors
	if errors.As(e.err, &fe) && len(fe) > 1 {
		var b strings.Builder
		fmt.Fprintf(&b, "%s: %d problems:", e.path, len(fe))
		for _, f := range fe {
			b.WriteString("\n  " + f.Error())
		}
		return b.String()
	}
	return e.path + ": " + e.err.Error()
}
