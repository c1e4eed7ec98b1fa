package profile

import (
	"errors"
	"fmt"
	"strings"

	"github.com/falconhq/falcon/internal/errdefs"
)

// Report is the analysis of one XSpace file: every device plane, and a
// summary over all of them.
type Report struct {
	File      string   `json:"file"`
	Bytes     int64    `json:"bytes"`  // the XSpace's size (decompressed)
	Events    int64    `json:"events"` // events decoded, of every plane
	Hostnames []string `json:"hostnames,omitempty"`
	// Summary combines the devices: step k lasts as long as its slowest
	// device; times, FLOPs and bytes are sums over the devices (so with 4
	// devices WindowPs is 4 times a device's), and utilizations are
	// those sums over the devices' summed peaks.
	Summary Figures  `json:"summary"`
	Devices []Device `json:"devices"` // in plane order
	// Warnings say what the figures could not include, and why.
	Warnings []string `json:"warnings,omitempty"`
}

// Device is the analysis of one device plane.
type Device struct {
	Plane string `json:"plane"` // "/device:TPU:0"
	Kind  string `json:"kind"`  // "tpu" or "gpu"
	Figures
}

// Window values: what the figures of a device cover.
const (
	// WindowSteps: the device's steps (its Steps line); an op counts when
	// it starts within a step.
	WindowSteps = "steps"
	// WindowOps: no Steps line, so from the first op's start to the last
	// op's end.
	WindowOps = "ops"
	// WindowNone: neither steps nor ops.
	WindowNone = "none"
)

// Figures are the measures of one device, or of all of them.
type Figures struct {
	Window string    `json:"window"`
	Steps  StepStats `json:"steps"`
	// DeviceSteps is the number of steps over all devices (for a device,
	// Steps.Count): what per-step comparisons divide by.
	DeviceSteps int64 `json:"device_steps"`
	// WindowPs is the time the figures cover: the sum of the step times,
	// or the op span without steps. Utilizations divide by it.
	WindowPs int64 `json:"window_ps"`
	// BusyPs is the part of the window covered by at least one op;
	// IdlePs the rest.
	BusyPs       int64   `json:"busy_ps"`
	IdlePs       int64   `json:"idle_ps"`
	IdleFraction float64 `json:"idle_fraction"`
	// SelfTimePs is the sum of the ops' self times: BusyPs, unless ops of
	// one line overlap without nesting or ops run on several op lines.
	SelfTimePs int64 `json:"self_time_ps"`
	// FLOPs and bytes of the ops in the window, as XLA's cost analysis put
	// them in the profile (flops, model_flops, bytes_accessed), each op
	// counted once per occurrence. ModelFlops falls back to an op's flops
	// where it has no model_flops, as XProf does.
	Flops         uint64 `json:"flops"`
	ModelFlops    uint64 `json:"model_flops"`
	BytesAccessed uint64 `json:"bytes_accessed"`
	Peak          Peak   `json:"peak"`
	// Utilizations: achieved ÷ (WindowPs × peak), in a Summary the sums
	// of both over the devices; absent without a peak.
	FlopsUtilization        *float64 `json:"flops_utilization,omitempty"`
	ModelFlopsUtilization   *float64 `json:"model_flops_utilization,omitempty"`
	HBMBandwidthUtilization *float64 `json:"hbm_bandwidth_utilization,omitempty"`
	// OutsideWindow counts the op events that started outside every step,
	// which no figure includes.
	OutsideWindow OutsideWindow `json:"outside_window"`
	Categories    []Category    `json:"categories"` // by self time, largest first
	// OpCount is the number of distinct ops; Ops lists them by self time,
	// largest first: all of them in a Summary, the first
	// Options.DeviceOps of a Device.
	OpCount int  `json:"op_count"`
	Ops     []Op `json:"ops"`
}

// OutsideWindow is what lies outside a device's steps.
type OutsideWindow struct {
	Events int64 `json:"events"`
	TimePs int64 `json:"time_ps"`
}

// StepStats summarize step times, in picoseconds.
type StepStats struct {
	Count   int     `json:"count"`
	TotalPs int64   `json:"total_ps"`
	MeanPs  float64 `json:"mean_ps"`
	// MedianPs is the middle step time (the mean of the middle two of an
	// even count); P90Ps interpolates linearly between the closest ranks,
	// as numpy.percentile does by default.
	MedianPs float64 `json:"median_ps"`
	P90Ps    float64 `json:"p90_ps"`
	MinPs    int64   `json:"min_ps"`
	MaxPs    int64   `json:"max_ps"`
}

// Peak is a device's peak FLOP/s and HBM bandwidth and where each came
// from: "options", "profile" (the plane's peak_teraflops_per_second and
// peak_hbm_bw_gigabytes_per_second stats) or "accelerator table (v5p)".
// In a Summary they are sums over the devices.
type Peak struct {
	FLOPS             float64 `json:"flops_per_second"`
	FLOPSSource       string  `json:"flops_source,omitempty"`
	HBMBytesPerSecond float64 `json:"hbm_bytes_per_second"`
	HBMSource         string  `json:"hbm_source,omitempty"`
}

// Op is one HLO op, by name (display name when the profile gives one); ops
// of one name in several programs are counted together.
type Op struct {
	Name        string `json:"name"`
	Category    string `json:"category"` // hlo_category; "" when the profile has none
	Occurrences int64  `json:"occurrences"`
	// TimePs includes the ops nested in it on the XLA Ops line;
	// SelfTimePs does not.
	TimePs        int64   `json:"time_ps"`
	SelfTimePs    int64   `json:"self_time_ps"`
	SelfFraction  float64 `json:"self_fraction"` // of Figures.SelfTimePs
	Flops         uint64  `json:"flops"`
	ModelFlops    uint64  `json:"model_flops"`
	BytesAccessed uint64  `json:"bytes_accessed"`
}

// Category sums the ops of one HLO category. TimePs counts nested ops in
// their parents too; SelfTimePs adds up.
type Category struct {
	Name          string  `json:"name"`
	Ops           int     `json:"ops"`
	Occurrences   int64   `json:"occurrences"`
	TimePs        int64   `json:"time_ps"`
	SelfTimePs    int64   `json:"self_time_ps"`
	SelfFraction  float64 `json:"self_fraction"`
	Flops         uint64  `json:"flops"`
	BytesAccessed uint64  `json:"bytes_accessed"`
}

// NoDevicesError is a profile without device planes: a host-only trace,
// or one of a job that used no accelerator.
type NoDevicesError struct {
	File   string
	Planes []string
}

func (e *NoDevicesError) Error() string {
	planes := "none"
	if len(e.Planes) > 0 {
		planes = strings.Join(e.Planes, ", ")
	}
	return fmt.Sprintf("%s has no device planes (/device:TPU:N or /device:GPU:N) to analyse; its planes: %s", e.File, planes)
}

// Unwrap makes it bad input (errdefs.ErrInvalid).
func (e *NoDevicesError) Unwrap() error { return errdefs.ErrInvalid }

// IsNoDevices reports whether err is a *NoDevicesError.
func IsNoDevices(err error) bool {
	var e *NoDevicesError
	return errors.As(err, &e)
}
