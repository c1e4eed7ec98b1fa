package exec

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/ranks"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
)

// execAll runs the command in every rank of the role (or of every role)
// at once.
func execAll(ctx context.Context, opts *Options) error {
	c, err := opts.Client()
	if err != nil {
		return err
	}
	exp, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: opts.ID})
	if err != nil {
		return err
	}
	targets, err := ranks.All(exp, opts.Role)
	if err != nil {
		return err
	}
	var outMu, errMu sync.Mutex
	type result struct {
		exit *falconv1.ExecExit
		err  error
	}
	results := make([]result, len(targets))
	var wg sync.WaitGroup
	for i, t := range targets {
		wg.Go(func() {
			prefix := "[" + t.String() + "] " // as exp logs marks its lines
			stdout := &linePrefixer{w: opts.IO.Out, mu: &outMu, prefix: prefix}
			stderr := &linePrefixer{w: opts.IO.ErrOut, mu: &errMu, prefix: prefix}
			start := &falconv1.ExecStart{ExpId: opts.ID, Role: t.Role, Rank: t.Rank, Command: opts.Command, NoWait: opts.NoWait}
			exit, err := c.Exec(ctx, start, client.ExecIO{Stdout: stdout, Stderr: stderr,
				Notice: func(m string) { fmt.Fprintf(stderr, "falcon: %s\n", m) }})
			stdout.flush()
			stderr.flush()
			results[i] = result{exit, err}
		})
	}
	wg.Wait()
	// The first rank that failed (by role, then rank) is the answer (an
	// error is printed by the CLI as every error is); every other failure
	// is said here.
	var first error
	firstFailed := 0
	for i, r := range results {
		t := targets[i]
		switch {
		case r.err != nil && first == nil:
			first, firstFailed = ranks.Err(t.String(), r.err), i
		case r.err != nil:
			// An ended experiment refuses every rank alike: said once.
			if f := results[firstFailed].err; f == nil || errdefs.Message(r.err) != errdefs.Message(f) {
				fmt.Fprintf(opts.IO.ErrOut, "falcon: %s: %s\n", t, errdefs.Message(r.err))
			}
		case r.exit.GetCode() != 0:
			fmt.Fprintf(opts.IO.ErrOut, "falcon: %s: command exited with code %d\n", t, r.exit.GetCode())
			if first == nil {
				first = &factory.ExitError{Code: int(r.exit.GetCode()), Kind: "CommandExited",
					Err: fmt.Errorf("%s: command exited with code %d", t, r.exit.GetCode()), Quiet: true}
			}
		}
	}
	return first
}

// linePrefixer writes whole lines to w, each after prefix, under mu: the
// ranks' output interleaves by lines, never inside one.
type linePrefixer struct {
	w      io.Writer
	mu     *sync.Mutex
	prefix string
	part   []byte // a line not yet ended
}

func (p *linePrefixer) Write(b []byte) (int, error) {
	p.part = append(p.part, b...)
	i := bytes.LastIndexByte(p.part, '\n')
	if i < 0 {
		return len(b), nil
	}
	var out []byte
	for line := range bytes.Lines(p.part[:i+1]) {
		out = append(append(out, p.prefix...), line...)
	}
	p.part = append(p.part[:0], p.part[i+1:]...)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, err := p.w.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// flush writes a last line the command did not end, ending it.
func (p *linePrefixer) flush() {
	if len(p.part) > 0 {
		_, _ = p.Write([]byte{'\n'})
	}
}
