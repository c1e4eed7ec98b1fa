// Package report implements `falcon report ls` and `falcon report cat`:
// the analyses of an experiment and their reports.
package report
