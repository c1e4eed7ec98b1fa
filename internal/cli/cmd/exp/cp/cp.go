package cp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/cli/progress"
	"github.com/falconhq/falcon/internal/cli/ranks"
	"github.com/falconhq/falcon/internal/client"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/rankexec"
)

// Options are the inputs of `falcon exp cp`.
type Options struct {
	IO     *iostreams.IOStreams
	Client func() (*client.Client, error)

	Src, Dst string
	Role     string
	Rank     int32
	// AllRanks copies to every rank of the role (every role's without
	// one), one after the other.
	AllRanks bool
	// Attempts bounds how often a dropped stream is resumed.
	Attempts int
	// Backoff is the pause before the nth retry, times n.
	Backoff time.Duration
}

// NewCmdCp builds the command. runF replaces cpRun in tests.
func NewCmdCp(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Client: f.Client, Attempts: 10, Backoff: 500 * time.Millisecond}
	cmd := &cobra.Command{
		Use:   "cp SRC DST [--role R] [--rank N | --all-ranks]",
		Short: "Copy files and directories to or from a rank of a running experiment",
		Long: `Copy a file or a directory (recursively, as cp -r does) between this
machine and a rank of a running experiment. The remote side is written
EXP:PATH, EXP the experiment's ID or name and PATH absolute or relative to
the rank's working directory; exactly one of SRC and DST is remote. As
with scp, a colon before any slash makes an argument remote: a local file
named a:b is ./a:b (one that exists under the whole argument stays local).
Missing parent directories are created on the remote side. Without --rank
it is rank 0; without --role the experiment's only role. --all-ranks
copies to every rank of the role (of every role without --role), one
after the other (to a relative path on falcon dev, where the ranks share
one machine); from every rank, each rank's copy goes into DST/ROLE-N.

Everything goes through the API server over the exec channel: a directory
as a tar stream, a file as its bytes, each checked with cksum on both
sides. A dropped connection is resumed where it stopped. On a terminal,
what has moved is shown on stderr. The rank's image needs /bin/sh and
coreutils (or busybox), and tar for directories.`,
		Example: `  falcon exp cp ./config.yaml exp-q7odgo8q9x:/workspace/config.yaml
  falcon exp cp ./patch.diff my-run:patch.diff   # by name, into the rank's working directory
  falcon exp cp ./data exp-q7odgo8q9x:/tmp/ --rank 1
  falcon exp cp ./patch.py my-run:/workspace/patch.py --all-ranks
  falcon exp cp my-run:/tmp/profile ./profiles --all-ranks   # ./profiles/main-0/profile, ...
  falcon exp cp exp-q7odgo8q9x:/tmp/profile ./profile`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Src, opts.Dst = args[0], args[1]
			if opts.Rank < 0 {
				return errdefs.Invalid("--rank", "must not be negative, got %d", opts.Rank)
			}
			if opts.AllRanks && cmd.Flags().Changed("rank") {
				return errdefs.Invalid("--all-ranks", "copies to every rank; drop --rank %d", opts.Rank)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return cpRun(cmd.Context(), opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Role, "role", "", "The role (required when the experiment has several)")
	fl.Int32Var(&opts.Rank, "rank", 0, "The rank")
	fl.BoolVar(&opts.AllRanks, "all-ranks", false, "Copy to (or from, into DST/ROLE-N) every rank of the role (every role's without --role), one after the other")
	return cmd
}

var remoteRE = regexp.MustCompile(`^(exp-[a-z0-9]{10}):(.*)$`)

// spec is one side of a copy.
type spec struct {
	exp  string // "" for a local path
	path string
}

func parseSpec(s string) spec {
	if m := remoteRE.FindStringSubmatch(s); m != nil {
		return spec{exp: m[1], path: m[2]}
	}
	return spec{path: s}
}

// Parse checks the two sides: exactly one remote, with a path.
func Parse(src, dst string) (from, to spec, err error) {
	from, to = parseSpec(src), parseSpec(dst)
	switch {
	case from.exp == "" && to.exp == "":
		return from, to, errdefs.Invalid("arguments", "both %q and %q are local: one side must be a rank, written EXP:/path (e.g. exp-q7odgo8q9x:/tmp/x)", src, dst)
	case from.exp != "" && to.exp != "":
		return from, to, errdefs.Invalid("arguments", "both %q and %q are remote: copy through this machine in two steps", src, dst)
	case from.exp != "" && from.path == "", to.exp != "" && to.path == "":
		return from, to, errdefs.Invalid("arguments", "name a path after the experiment's colon, e.g. %s:/tmp/x", from.exp+to.exp)
	case from.exp == "" && from.path == "", to.exp == "" && to.path == "":
		return from, to, errdefs.Invalid("arguments", "the local path is empty")
	}
	return from, to, nil
}

func cpRun(ctx context.Context, opts *Options) error {
	from, to, err := Parse(opts.Src, opts.Dst)
	if err != nil {
		return err
	}
	c, err := opts.Client()
	if err != nil {
		return err
	}
	exp := from.exp + to.exp
	targets := []ranks.Target{{Role: opts.Role, Rank: opts.Rank}}
	if opts.AllRanks {
		if to.exp == "" {
			// Every rank's copy goes to a directory of its own, which
			// must not be mistaken for a file name.
			if fi, err := os.Stat(to.path); err == nil && !fi.IsDir() {
				return errdefs.Invalid("--all-ranks", "copies from every rank into DST/ROLE-N, one directory each; %s is a file", to.path)
			}
		}
		e, err := c.GetExp(ctx, &falconv1.GetExpRequest{Id: exp})
		if err != nil {
			return err
		}
		if targets, err = ranks.All(e, opts.Role); err != nil {
			return err
		}
	}
	r := &remote{c: c, exp: exp, notices: opts.IO.ErrOut}
	cp := &copier{r: r, attempts: max(opts.Attempts, 1), backoff: opts.Backoff, log: opts.IO.ErrOut}
	if opts.IO.IsStderrTTY() {
		// The line shows what has moved; notices print above it.
		cp.m = &meter{}
		line := progress.Start(opts.IO.ErrOut, 200*time.Millisecond, cp.m.line)
		defer line.Stop()
		r.notices, cp.log = line, line
	}
	for i, t := range targets {
		r.role, r.rank, r.noticed = t.Role, t.Rank, false
		if opts.AllRanks {
			cp.m.prefix("[" + t.String() + "] ") // as exp logs marks its lines
		}
		var err error
		switch {
		case to.exp != "":
			err = cp.upload(ctx, from.path, to.path)
		case opts.AllRanks:
			dir := filepath.Join(to.path, fmt.Sprintf("%s-%d", t.Role, t.Rank))
			if err = os.MkdirAll(dir, 0o755); err == nil {
				if err = cp.download(ctx, from.path, dir); err != nil {
					_ = os.Remove(dir) // only if nothing arrived: no empty ROLE-N left behind
				}
			}
		default:
			err = cp.download(ctx, from.path, to.path)
		}
		if err != nil {
			if opts.AllRanks {
				at := fmt.Sprintf("--all-ranks stopped at %s, %d of %d", t, i+1, len(targets))
				switch {
				case i == 1:
					at += " (the one before it has its copy)"
				case i > 1:
					at += fmt.Sprintf(" (the %d before it have theirs)", i)
				}
				return ranks.Err(at, err)
			}
			return err
		}
		if cp.m != nil && i < len(targets)-1 {
			fmt.Fprintln(cp.log, cp.m.line()) // this rank's totals stay above the next one's line
		}
	}
	return nil
}

// remote runs commands in the rank.
type remote struct {
	c       *client.Client
	exp     string
	role    string
	rank    int32
	notices io.Writer
	noticed bool
}

func (r *remote) where() string {
	w := fmt.Sprintf("rank %d of %s", r.rank, r.exp)
	if r.role != "" {
		w = fmt.Sprintf("rank %d of role %s of %s", r.rank, r.role, r.exp)
	}
	return w
}

// run runs argv with stdin (nil: none), its output to stdout; it returns
// the exit code and the tail of its stderr. An error is a failure to run
// it to its end.
func (r *remote) run(ctx context.Context, argv []string, stdin io.Reader, stdout io.Writer) (int, string, error) {
	if stdout == nil {
		stdout = io.Discard
	}
	var stderr tailBuffer
	exit, err := r.c.Exec(ctx, &falconv1.ExecStart{ExpId: r.exp, Role: r.role, Rank: r.rank, Command: argv, Stdin: stdin != nil},
		client.ExecIO{Stdin: stdin, Stdout: stdout, Stderr: &stderr, Notice: func(m string) {
			if !r.noticed {
				r.noticed = true
				fmt.Fprintf(r.notices, "falcon: %s\n", m)
			}
		}})
	if err != nil {
		return -1, stderr.String(), err
	}
	return int(exit.GetCode()), stderr.String(), nil
}

// sh runs a shell script with args and fails unless it exits 0; the
// shell's missing is said by name.
func (r *remote) sh(ctx context.Context, script string, stdin io.Reader, stdout io.Writer, args ...string) error {
	_, err := r.shErr(ctx, script, stdin, stdout, args...)
	return err
}

// shErr is sh that also returns the tail of the script's stderr, for
// scripts that answer there beside a stream on stdout.
func (r *remote) shErr(ctx context.Context, script string, stdin io.Reader, stdout io.Writer, args ...string) (string, error) {
	code, errs, err := r.run(ctx, append([]string{"/bin/sh", "-c", script, "sh"}, args...), stdin, stdout)
	switch {
	case err != nil:
		return errs, err
	case code == rankexec.NotFoundCode && strings.Contains(errs, "/bin/sh"):
		return errs, errdefs.Precondition("%s has no /bin/sh, which falcon exp cp needs: %s", r.where(), strings.TrimSpace(errs))
	case code != 0:
		return errs, fmt.Errorf("%s: exit code %d: %s", r.where(), code, strings.TrimSpace(errs))
	}
	return errs, nil
}

// probeScript says what the path is (with a file's size) and whether tar
// is there.
const probeScript = `if [ -d "$1" ]; then echo dir; elif [ -f "$1" ]; then echo file $(wc -c < "$1"); elif [ -e "$1" ]; then echo other; else echo none; fi
if command -v tar >/dev/null 2>&1; then echo tar; else echo notar; fi`

type probe struct {
	kind string // dir, file, other, none
	size int64  // a file's, for the progress line
	tar  bool
}

func (r *remote) probe(ctx context.Context, p string) (probe, error) {
	var out bytes.Buffer
	if err := r.sh(ctx, probeScript, nil, &out, p); err != nil {
		return probe{}, err
	}
	f := strings.Fields(out.String())
	if len(f) == 3 && f[0] == "file" {
		size, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			return probe{}, fmt.Errorf("%s: unexpected answer to the path check: %q", r.where(), out.String())
		}
		return probe{kind: f[0], size: size, tar: f[2] == "tar"}, nil
	}
	if len(f) != 2 {
		return probe{}, fmt.Errorf("%s: unexpected answer to the path check: %q", r.where(), out.String())
	}
	return probe{kind: f[0], tar: f[1] == "tar"}, nil
}

func (r *remote) needTar(p probe) error {
	if !p.tar {
		return errdefs.Precondition("%s has no tar in its image, which falcon exp cp needs to copy a directory; copy single files, or add tar to the image", r.where())
	}
	return nil
}

// sum is a file's cksum: CRC and size.
type sum struct {
	crc  uint32
	size int64
}

func (s sum) String() string { return fmt.Sprintf("cksum %d, %d bytes", s.crc, s.size) }

// cksums lists every regular file under dir (relative paths, slash
// separated, without "./") with its cksum.
func (r *remote) cksums(ctx context.Context, dir string) (map[string]sum, error) {
	var out bytes.Buffer
	if err := r.sh(ctx, `cd "$1" && find . -type f -exec cksum {} +`, nil, &out, dir); err != nil {
		return nil, err
	}
	m := map[string]sum{}
	for line := range strings.SplitSeq(out.String(), "\n") {
		if line == "" {
			continue
		}
		f := strings.SplitN(line, " ", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("%s: cannot read cksum's line %q", r.where(), line)
		}
		crc, err1 := strconv.ParseUint(f[0], 10, 32)
		size, err2 := strconv.ParseInt(f[1], 10, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("%s: cannot read cksum's line %q", r.where(), line)
		}
		m[strings.TrimPrefix(f[2], "./")] = sum{crc: uint32(crc), size: size}
	}
	return m, nil
}

// fileSum is the cksum of one remote file.
func (r *remote) fileSum(ctx context.Context, p string) (sum, error) {
	var out bytes.Buffer
	if err := r.sh(ctx, `cksum < "$1"`, nil, &out, p); err != nil {
		return sum{}, err
	}
	return r.parseSum(out.String())
}

// parseSum reads cksum's answer for one input: "CRC SIZE".
func (r *remote) parseSum(out string) (sum, error) {
	f := strings.Fields(out)
	if len(f) < 2 {
		return sum{}, fmt.Errorf("%s: cannot read cksum's answer %q", r.where(), out)
	}
	crc, err1 := strconv.ParseUint(f[0], 10, 32)
	size, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return sum{}, fmt.Errorf("%s: cannot read cksum's answer %q", r.where(), out)
	}
	return sum{crc: uint32(crc), size: size}, nil
}

// copier moves the bytes and retries what drops.
type copier struct {
	r        *remote
	attempts int
	backoff  time.Duration
	log      io.Writer
	m        *meter // nil: no progress line
}

// dropped reports whether err is a broken stream worth resuming: the
// server or the connection went away (Unavailable), not a refusal.
func dropped(err error) bool {
	return err != nil && (errdefs.Code(err) == codes.Unavailable || status.Code(err) == codes.Unavailable)
}

// retry runs step until it succeeds, fails for good, or the attempts are
// spent; each retry says why on stderr.
func (cp *copier) retry(ctx context.Context, what string, step func(attempt int) error) error {
	var err error
	for attempt := 0; attempt < cp.attempts; attempt++ {
		if attempt > 0 {
			fmt.Fprintf(cp.log, "falcon: %s: %v; resuming (attempt %d of %d)\n", what, err, attempt+1, cp.attempts)
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(time.Duration(attempt) * cp.backoff):
			}
		}
		if err = step(attempt); !dropped(err) {
			return err
		}
	}
	return err
}

// localSum is the cksum of a local file.
func localSum(p string) (sum, error) {
	f, err := os.Open(p)
	if err != nil {
		return sum{}, err
	}
	defer f.Close()
	c := newCksum()
	n, err := io.CopyBuffer(c, f, make([]byte, 1<<20))
	return sum{crc: c.Sum32(), size: n}, err
}

// maxResend bounds the files one download round asks for again, as
// arguments of tar.
const maxResend = 1000

// resumeBlock is dd's block when an upload resumes (resumeScript's bs):
// the offset is rounded down to it.
const resumeBlock = 64 << 10

// partSuffix names a file while it is being received; an upload's part
// file adds a token of its own.
const partSuffix = ".falcon-part"

// upload copies the local path src to the remote path dst.
func (cp *copier) upload(ctx context.Context, src, dst string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return errdefs.NotFoundf("%s: %v", src, err)
	}
	var pr probe
	if err := cp.retry(ctx, "checking "+dst, func(int) (err error) { pr, err = cp.r.probe(ctx, dst); return err }); err != nil {
		return err
	}
	if !fi.IsDir() {
		target := dst
		if pr.kind == "dir" {
			target = path.Join(dst, filepath.Base(src))
		}
		return cp.uploadFile(ctx, src, target)
	}
	if err := cp.r.needTar(pr); err != nil {
		return err
	}
	parent, name := path.Dir(path.Clean(dst)), path.Base(path.Clean(dst))
	switch pr.kind {
	case "dir":
		parent, name = path.Clean(dst), filepath.Base(filepath.Clean(src))
	case "none":
	default:
		return errdefs.Precondition("%s:%s exists and is not a directory: cannot copy directory %s over it", cp.r.exp, dst, src)
	}
	return cp.uploadDir(ctx, src, parent, name)
}

// sendScript writes the first stream of an upload to the part file $1:
// the $2 bytes it is owed, from offset 0, then its cksum. It clears the
// part files that earlier, interrupted copies to the target $3 left (and
// so fails a copy to the same target running at once, which would race
// this one's rename anyway), never its own, and it never truncates: the
// exec of a stream cut early may be started by the server only after the
// next one has written (its bytes were still on their way when the
// connection broke), and a late truncation would leave a hole where the
// next stream had written. A late stream writes the same bytes to the same
// places, which is harmless.
// head -c stops after the bytes it is owed: the far side never depends on
// seeing stdin end, which not every runtime passes on.
const sendScript = `mkdir -p "$(dirname "$1")" || exit
for f in "$3"` + partSuffix + `*; do [ "$f" = "$1" ] || rm -f -- "$f"; done
head -c "$2" 1<>"$1" && cksum < "$1"`

// resumeScript writes a resumed stream of an upload to the part file $1,
// at block $2 (dd seek, never appending: an earlier stream's process may
// still be writing its last bytes), the $3 bytes left.
var resumeScript = `head -c "$3" | dd of="$1" bs=` + strconv.Itoa(resumeBlock) + ` seek="$2" conv=notrunc 2>/dev/null`

// uploadFile sends a file's bytes to a part file beside target, resuming
// where a dropped stream stopped, checks its cksum and renames it. The
// part file's name is this copy's own, so that nothing another copy (or a
// late stream of an earlier one) does to its part file touches this one.
func (cp *copier) uploadFile(ctx context.Context, src, target string) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	// The first stream sums the bytes as it reads them to send; only a
	// resumed one reads the file again for its sum.
	var sent *sum
	part := fmt.Sprintf("%s%s-%08x", target, partSuffix, rand.Uint32())
	// The first stream writes the part file and then sums it in the same
	// exec, so the check costs no second exec; a resumed one is summed
	// after, whole. Summing after the write reads the file again, from the
	// page cache, yet costs less than a tee into cksum beside the write
	// (measured: a third process and a second pipe copy of every byte, on
	// the cores that also carry the stream).
	var piped *sum
	err = cp.retry(ctx, "sending "+src, func(attempt int) error {
		var off int64
		if attempt > 0 {
			s, err := cp.remoteSize(ctx, part)
			if err != nil {
				return err
			}
			off = s / resumeBlock * resumeBlock
		}
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := f.Seek(off, io.SeekStart); err != nil {
			return err
		}
		left := strconv.FormatInt(fi.Size()-off, 10)
		sent, piped = nil, nil
		cp.m.begin(filepath.Base(src), off, fi.Size())
		in := cp.m.reader(f)
		if off == 0 {
			var out bytes.Buffer
			local := &lockedSum{c: newCksum()}
			// A head that could not write (a full disk) fails the chain;
			// cksum's answer carries the size, checked with the CRC.
			if err := cp.r.sh(ctx, sendScript, io.TeeReader(in, local), &out, part, left, target); err != nil {
				return err
			}
			got, err := cp.r.parseSum(out.String())
			if err != nil {
				return err
			}
			piped = &got
			sent = local.sum()
			return nil
		}
		return cp.r.sh(ctx, resumeScript, in, nil, part, strconv.FormatInt(off/resumeBlock, 10), left)
	})
	if err != nil {
		return err
	}
	var w sum
	if sent != nil && sent.size == fi.Size() {
		w = *sent
	} else if w, err = localSum(src); err != nil {
		return err
	}
	var got sum
	if piped != nil {
		got = *piped
	} else if err := cp.retry(ctx, "checking "+target, func(int) (err error) { got, err = cp.r.fileSum(ctx, part); return err }); err != nil {
		return err
	}
	if got != w {
		return fmt.Errorf("%s:%s arrived damaged (%s; %s has %s): nothing was replaced", cp.r.exp, target, got, src, w)
	}
	return cp.retry(ctx, "renaming "+part, func(int) error { return cp.r.sh(ctx, `exec mv -f "$1" "$2"`, nil, nil, part, target) })
}

// lockedSum sums what passes through it. The exec client reads stdin on a
// goroutine of its own that may still be running when the exec returns,
// so the sum is read under the lock; every byte the far side received was
// summed before it was sent.
type lockedSum struct {
	mu sync.Mutex
	c  *cksum
}

func (l *lockedSum) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.c.Write(p)
}

func (l *lockedSum) sum() *sum {
	l.mu.Lock()
	defer l.mu.Unlock()
	return &sum{crc: l.c.Sum32(), size: int64(l.c.n)}
}

// remoteSize is a remote file's size, 0 if it does not exist.
func (cp *copier) remoteSize(ctx context.Context, p string) (int64, error) {
	var out bytes.Buffer
	if err := cp.r.sh(ctx, `if [ -f "$1" ]; then wc -c < "$1"; else echo 0; fi`, nil, &out, p); err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(strings.TrimSpace(out.String()), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: cannot read the size of %s: %q", cp.r.where(), p, out.String())
	}
	return n, nil
}

// uploadDir sends src as parent/name in tar streams until every file's
// cksum on the far side is its own: first everything, then, after a drop
// or damage, only the files that are not.
func (cp *copier) uploadDir(ctx context.Context, src, parent, name string) error {
	tree, err := walk(src)
	if err != nil {
		return err
	}
	todo := tree.entries // everything, the first time
	for round := 0; ; round++ {
		err := cp.retry(ctx, "sending "+src, func(int) error {
			cp.m.begin(filepath.Base(src), 0, sizeOf(todo))
			pr, pw := io.Pipe()
			written := make(chan struct{})
			go func() {
				defer close(written)
				pw.CloseWithError(writeTar(io.MultiWriter(pw, cp.m), src, name, todo))
			}()
			err := cp.r.sh(ctx, `mkdir -p "$1" && cd "$1" && exec tar xf -`, pr, nil, parent)
			pr.Close()
			<-written // it notes cksums that missing reads
			return err
		})
		if err != nil && !dropped(err) {
			return err
		}
		var got map[string]sum
		if err := cp.retry(ctx, "checking "+path.Join(parent, name), func(int) (err error) {
			got, err = cp.r.cksums(ctx, path.Join(parent, name))
			return err
		}); err != nil {
			return err
		}
		todo = tree.missing(got)
		if len(todo) == 0 {
			return nil
		}
		if round+1 >= cp.attempts {
			return fmt.Errorf("%s:%s: %d files did not arrive whole after %d rounds (first: %s)", cp.r.exp, path.Join(parent, name), len(todo), round+1, todo[0].rel)
		}
		fmt.Fprintf(cp.log, "falcon: %d files of %s did not arrive whole; sending them again\n", len(todo), src)
		todo = append(tree.dirs(), todo...)
	}
}

// download copies the remote path src to the local path dst.
func (cp *copier) download(ctx context.Context, src, dst string) error {
	var pr probe
	if err := cp.retry(ctx, "checking "+src, func(int) (err error) { pr, err = cp.r.probe(ctx, src); return err }); err != nil {
		return err
	}
	target := dst
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		target = filepath.Join(dst, path.Base(path.Clean(src)))
	}
	switch pr.kind {
	case "none":
		return errdefs.NotFoundf("%s:%s does not exist in %s", cp.r.exp, src, cp.r.where())
	case "file":
		return cp.downloadFile(ctx, src, target, pr.size)
	case "dir":
		if err := cp.r.needTar(pr); err != nil {
			return err
		}
		return cp.downloadDir(ctx, src, target)
	}
	return errdefs.Precondition("%s:%s is neither a file nor a directory", cp.r.exp, src)
}

// downloadFile reads a file's bytes into target's part file, from the byte
// a dropped stream reached, checks its cksum against the far side's and
// renames it.
func (cp *copier) downloadFile(ctx context.Context, src, target string, size int64) error {
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	part := target + partSuffix
	f, err := os.OpenFile(part, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	defer os.Remove(part)
	// The first stream sends the file on stdout while the far side's
	// cksum of it runs beside, answering on stderr, and this side sums the
	// bytes as they arrive: the check costs no other exec and no pass over
	// the file before or after. A resumed stream is checked whole after.
	running := newCksum()
	resumed := false
	var want *sum
	err = cp.retry(ctx, "receiving "+src, func(attempt int) error {
		off, err := f.Seek(0, io.SeekEnd)
		if err != nil {
			return err
		}
		if attempt > 0 {
			resumed = true // what a cut stream wrote is summed from the file
		}
		cp.m.begin(path.Base(src), off, size)
		out := io.MultiWriter(f, running, cp.m)
		if off == 0 {
			// cat, not tail -c +1: GNU tail copies in 8 KiB writes, cat in
			// 128 KiB ones, and every write is a message on its way here.
			errs, err := cp.r.shErr(ctx, `cksum < "$1" >&2 & cat "$1"; s=$?; wait $! || exit 1; exit $s`, nil, out, src)
			if err != nil {
				return err
			}
			lines := strings.Split(strings.TrimSpace(errs), "\n")
			got, err := cp.r.parseSum(lines[len(lines)-1])
			if err != nil {
				return err
			}
			want = &got
			return nil
		}
		return cp.r.sh(ctx, `exec tail -c +"$2" "$1"`, nil, out, src, strconv.FormatInt(off+1, 10))
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	got := sum{crc: running.Sum32(), size: int64(running.n)}
	if resumed {
		if got, err = localSum(part); err != nil {
			return err
		}
	}
	if want == nil || resumed {
		var w sum
		if err := cp.retry(ctx, "checking "+src, func(int) (err error) { w, err = cp.r.fileSum(ctx, src); return err }); err != nil {
			return err
		}
		want = &w
	}
	if got != *want {
		return fmt.Errorf("%s arrived damaged (%s; %s:%s has %s): nothing was replaced", target, got, cp.r.exp, src, *want)
	}
	return os.Rename(part, target)
}

// downloadDir reads src as a tar stream into target until every file the
// far side listed (with its cksum, before the transfer) is here whole.
func (cp *copier) downloadDir(ctx context.Context, src, target string) error {
	var want map[string]sum
	if err := cp.retry(ctx, "listing "+src, func(int) (err error) { want, err = cp.r.cksums(ctx, src); return err }); err != nil {
		return err
	}
	if err := os.MkdirAll(target, 0o755); err != nil {
		return err
	}
	got := map[string]sum{}
	var todo []string // nil: everything
	for round := 0; ; round++ {
		err := cp.retry(ctx, "receiving "+src, func(int) error {
			cp.m.begin(path.Base(path.Clean(src)), 0, wantSize(want, todo))
			pr, pw := io.Pipe()
			done := make(chan error, 1)
			go func() {
				err := readTar(cp.m.reader(pr), target, got)
				if err == nil {
					// tar pads its archive past the end marker.
					_, _ = io.Copy(io.Discard, pr)
				}
				pr.CloseWithError(err)
				done <- err
			}()
			var err error
			if todo == nil {
				err = cp.r.sh(ctx, `cd "$1" && exec tar cf - .`, nil, pw, src)
			} else {
				// Names as arguments, not a list on stdin (-T -): stdin's
				// end may never reach the far side (see uploadFile).
				err = cp.r.sh(ctx, `cd "$1" && shift && exec tar cf - -- "$@"`, nil, pw, append([]string{src}, todo[:min(len(todo), maxResend)]...)...)
			}
			pw.CloseWithError(errors.Join(err, io.EOF))
			if terr := <-done; err == nil {
				err = terr
			}
			return err
		})
		if err != nil && !dropped(err) {
			return err
		}
		todo = todo[:0:0]
		for rel, s := range want {
			if got[rel] != s {
				todo = append(todo, "./"+rel)
			}
		}
		if len(todo) == 0 {
			return nil
		}
		if round+1 >= cp.attempts {
			return fmt.Errorf("%s: %d files did not arrive whole after %d rounds (first: %s)", target, len(todo), round+1, todo[0])
		}
		fmt.Fprintf(cp.log, "falcon: %d files of %s:%s did not arrive whole; receiving them again\n", len(todo), cp.r.exp, src)
	}
}

// tailBuffer keeps the last 4 KiB written: enough of a command's stderr
// to say why it failed.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - 4096; over > 0 {
		t.b = t.b[over:]
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }
