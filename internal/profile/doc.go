// Package profile analyses XProf profiles of TPU and GPU jobs into
// structured data: step times, per-op and per-category time, FLOPS and
// HBM bandwidth utilization and device idle time (AnalyzeFile, Analyze),
// and the A/B comparison of two runs (Compare). It renders nothing but a
// minimal Markdown; the interface layer turns a Report or a Diff into
// tables, JSON or report.md.
//
// It reads each device plane (/device:TPU:N, /device:GPU:N) of an XSpace
// through internal/xplane, one event at a time, so a 1 GiB profile takes
// memory for its distinct ops and steps, not for its events. The lines
// and stats are those of XProf's xplane_schema:
//
//   - the "Steps" line: one event per step; step time statistics (count,
//     mean, median, p90 interpolated as numpy does, min, max). Steps set
//     the window: an op counts when it starts within a step, and ops
//     outside every step are counted apart and left out. Without steps
//     the window is the span of the ops.
//   - the "XLA Ops" line: HLO op events, nested where one op runs inside
//     another (a while loop's body). An op's time includes its nested ops;
//     its self time is its time less its direct children's, as XProf's op
//     profile computes it. Ops are aggregated by name (the metadata's
//     display name, else its name) and grouped by hlo_category.
//   - the op metadata's flops, model_flops and bytes_accessed stats (an
//     event's own stats override them), counted once per occurrence;
//     model_flops falls back to flops, as XProf does.
//
// FLOPS utilization is Σ flops ÷ (window × peak FLOP/s); model FLOPS
// utilization uses model_flops; HBM bandwidth utilization is
// Σ bytes_accessed ÷ (window × peak bytes/s). The peaks come from
// Options, else the plane's peak_teraflops_per_second and
// peak_hbm_bw_gigabytes_per_second stats, else the accelerator table
// (internal/accelerator, per JAX device) for Options.DeviceType; without
// any, utilizations are absent and a warning says why. Busy time is the
// part of the window covered by ops; idle time the rest.
//
// A Report has a Device per plane and a Summary over all of them, whose
// step k is the slowest device's and whose other figures are sums.
// Compare diffs two Summaries: step time and utilization deltas, op and
// category self time per device-step, the ops that changed most in
// absolute and relative terms, and the ops only one run has.
//
// bytes_accessed counts every memory space XLA's cost analysis sees;
// XProf's own HBM figure takes the HBM share from memory_access_breakdown,
// which is not read here, so this HBM utilization is an upper bound when
// ops also move data through on-chip memory.
//
// Not read (yet): GPU kernels on stream lines (a GPU plane without the
// "XLA Ops" line XProf derives gets step figures only), SparseCore planes,
// the XLA Modules line, device_offset_ps/device_duration_ps corrections,
// and HLO protos of the metadata plane.
package profile
