package iostreams

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/mattn/go-isatty"
)

// IOStreams are the standard streams of one CLI invocation.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdinTTY, stdoutTTY, stderrTTY bool
	inReader                       *bufio.Reader
}

// System returns the process's streams.
func System() *IOStreams {
	return &IOStreams{
		In:        os.Stdin,
		Out:       os.Stdout,
		ErrOut:    os.Stderr,
		stdinTTY:  isTerminal(os.Stdin),
		stdoutTTY: isTerminal(os.Stdout),
		stderrTTY: isTerminal(os.Stderr),
	}
}

func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// Test returns streams backed by buffers, none of them a terminal.
func Test() (ios *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

func (s *IOStreams) IsStdinTTY() bool  { return s.stdinTTY }
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// SetStdinTTY and friends let tests pretend a stream is a terminal.
func (s *IOStreams) SetStdinTTY(v bool)  { s.stdinTTY = v }
func (s *IOStreams) SetStdoutTTY(v bool) { s.stdoutTTY = v }
func (s *IOStreams) SetStderrTTY(v bool) { s.stderrTTY = v }

// ReadInput reads the file at path, or stdin when path is "-".
func (s *IOStreams) ReadInput(path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(s.in())
	}
	return os.ReadFile(path)
}

func (s *IOStreams) in() *bufio.Reader {
	if s.inReader == nil {
		s.inReader = bufio.NewReader(s.In)
	}
	return s.inReader
}

// Confirm asks a yes/no question on stderr and reads the answer from stdin.
// Anything but y or yes, including end of input, is no.
func (s *IOStreams) Confirm(question string) (bool, error) {
	fmt.Fprintf(s.ErrOut, "%s [y/N] ", question)
	line, err := s.in().ReadString('\n')
	if err != nil && err != io.EOF {
		return false, err
	}
	if err == io.EOF {
		fmt.Fprintln(s.ErrOut)
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return true, nil
	}
	return false, nil
}
