// Package progress draws one line of progress on a terminal: redrawn in
// place on a ticker, left at its last state when the work ends, with
// messages printed above it rather than through it. Commands draw it only
// when stderr is a terminal; piped, they print nothing of it.
package progress
