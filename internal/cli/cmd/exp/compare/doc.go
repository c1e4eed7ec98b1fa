// Package compare implements `falcon exp compare`: each metric the
// experiments share, its steady-state value in each, the change against
// the first, and whether that change is a regression, an improvement or
// noise.
package compare
