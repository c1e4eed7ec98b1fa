package analysis

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strconv"
	"strings"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/blobstore"
	"github.com/falconhq/falcon/internal/profile"
	"github.com/falconhq/falcon/internal/xplane"
)

// profileDir is where XProf (jax.profiler, the TensorBoard plugin) writes
// a session: <logdir>/plugins/profile/<session>/<host>.xplane.pb.
const profileDir = "plugins/profile/"

// rankDir matches a rank's own directory in a path (rank-3/, rank3/), for
// jobs whose ranks share the artifact dir and write under one each.
var rankDir = regexp.MustCompile(`(^|/)rank[-_]?(\d+)/`)

// findProfile picks one .xplane.pb under loc: of session (the newest,
// by name, when empty: XProf names sessions by time) and of rank (by a
// rank-N directory in its path, else the rank-th file of the session in
// name order, one per host).
func findProfile(ctx context.Context, blobs *blobstore.Opener, loc blobstore.Location, session string, rank int) (blobstore.File, error) {
	type cand struct {
		f       blobstore.File
		session string
	}
	var all []cand
	err := blobs.Walk(ctx, loc, func(f blobstore.File) error {
		i := strings.Index(f.Path, profileDir)
		if i < 0 || !strings.HasSuffix(f.Path, ".xplane.pb") && !strings.HasSuffix(f.Path, ".xplane.pb.gz") {
			return nil
		}
		rest := f.Path[i+len(profileDir):]
		s, _, ok := strings.Cut(rest, "/")
		if !ok {
			return nil
		}
		all = append(all, cand{f, s})
		return nil
	})
	if err != nil {
		return blobstore.File{}, err
	}
	if len(all) == 0 {
		return blobstore.File{}, fmt.Errorf("no *.xplane.pb under %s%s<session>/: jobs write profiles to $FALCON_ARTIFACT_DIR (e.g. jax.profiler.start_trace($FALCON_ARTIFACT_DIR))", loc, profileDir)
	}
	// The rank first: each host names its sessions by its own clock, so
	// the newest session is the rank's own newest, not the artifacts'.
	byRankDir := false
	var mine []cand
	for _, c := range all {
		if m := rankDir.FindStringSubmatch(c.f.Path); m != nil {
			byRankDir = true
			if n, _ := strconv.Atoi(m[2]); n == rank {
				mine = append(mine, c)
			}
		}
	}
	if !byRankDir {
		mine = all
	} else if len(mine) == 0 {
		return blobstore.File{}, fmt.Errorf("no *.xplane.pb of rank %d under %s (ranks write under rank-N/ there)", rank, loc)
	}
	sessions := map[string]bool{}
	for _, c := range mine {
		sessions[c.session] = true
	}
	names := make([]string, 0, len(sessions))
	for s := range sessions {
		names = append(names, s)
	}
	slices.Sort(names)
	if session == "" {
		session = names[len(names)-1]
	} else if !sessions[session] {
		return blobstore.File{}, fmt.Errorf("no profile session %q under %s; sessions: %s", session, loc, strings.Join(names, ", "))
	}
	var files []blobstore.File
	for _, c := range mine {
		if c.session == session {
			files = append(files, c.f)
		}
	}
	slices.SortFunc(files, func(a, b blobstore.File) int { return strings.Compare(a.Path, b.Path) })
	if byRankDir {
		return files[0], nil
	}
	// A shared directory: one file per host, in name order.
	if rank >= len(files) {
		return blobstore.File{}, fmt.Errorf("session %s under %s has %d profile files; no rank %d", session, loc, len(files), rank)
	}
	return files[rank], nil
}

// analyzeProfile reads one profile where it is stored, through ranged
// reads, never downloading it whole.
func analyzeProfile(ctx context.Context, blobs *blobstore.Opener, loc blobstore.Location, f blobstore.File, deviceType string) (*profile.Report, error) {
	if strings.HasSuffix(f.Path, ".gz") {
		return nil, fmt.Errorf("%s: gzip'd profiles are analysed from a local file only; write them uncompressed", f.Path)
	}
	ra := xplane.NewRangeReaderAt(func(off int64) (io.ReadCloser, error) {
		r, _, err := blobs.Open(ctx, loc, f.Path, off, -1)
		if err != nil {
			return nil, err
		}
		return r, nil
	})
	defer ra.Close()
	return profile.Analyze(ctx, xplane.NewReader(loc.String()+f.Path, ra, f.Size), profile.Options{DeviceType: deviceType})
}

func profileParams(a *falconv1.Analysis) (session string, rank int) {
	p := a.GetParams()
	rank, _ = strconv.Atoi(p["rank"])
	return p["session"], rank
}

// summaryOf keeps a report's headline figures: the summary without its
// op and category lists, which stay in report.json.
func summaryOf(f profile.Figures) map[string]any {
	b, _ := json.Marshal(f)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	delete(m, "ops")
	delete(m, "categories")
	return m
}

func runProfile(ctx context.Context, a *falconv1.Analysis, locs []blobstore.Location, blobs *blobstore.Opener) (*Result, error) {
	session, rank := profileParams(a)
	f, err := findProfile(ctx, blobs, locs[0], session, rank)
	if err != nil {
		return nil, err
	}
	// device_type is filled in at create from the experiment's roles: the
	// peaks a profile may not carry.
	r, err := analyzeProfile(ctx, blobs, locs[0], f, a.GetParams()["device_type"])
	if err != nil {
		return nil, err
	}
	return &Result{Summary: summaryOf(r.Summary), Report: r, Markdown: r.Markdown(20)}, nil
}

func runProfileCompare(ctx context.Context, a *falconv1.Analysis, locs []blobstore.Location, blobs *blobstore.Opener) (*Result, error) {
	session, rank := profileParams(a)
	reports := make([]*profile.Report, 2)
	for i := range 2 {
		f, err := findProfile(ctx, blobs, locs[i], session, rank)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", a.GetExpIds()[i], err)
		}
		dt := a.GetParams()["device_type"]
		if b := a.GetParams()["device_type_b"]; i == 1 && b != "" {
			dt = b // B ran on another accelerator: its own peaks
		}
		if reports[i], err = analyzeProfile(ctx, blobs, locs[i], f, dt); err != nil {
			return nil, err
		}
	}
	d := profile.Compare(reports[0], reports[1])
	summary := map[string]any{"a": a.GetExpIds()[0], "b": a.GetExpIds()[1]}
	b, _ := json.Marshal(d)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	for _, k := range []string{"step_time_mean_ps", "step_time_median_ps", "flops_utilization", "model_flops_utilization", "hbm_bandwidth_utilization"} {
		if v, ok := m[k]; ok {
			summary[k] = v
		}
	}
	return &Result{Summary: summary, Report: map[string]any{"a": reports[0], "b": reports[1], "diff": d}, Markdown: d.Markdown(20)}, nil
}
