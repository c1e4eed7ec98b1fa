// Package analysis is the analysis controller: it takes queued analyses
// from the API server (ClaimAnalysis), runs each next to the data — it
// reads the experiments' artifacts from their storage, so a large profile
// or dump never travels to the user — writes report.json and report.md
// under the first experiment's artifacts (reports/<analysis id>/), and
// reports the outcome with a bounded summary (FinishAnalysis).
//
// Its loop is level-triggered: every analysis is in the database, Pending
// until claimed, and a claim that is not finished (a controller killed
// mid-run) is given to another worker once stale, so none is left stuck.
// Report names are the analysis ID, so a rerun overwrites its own files.
package analysis
