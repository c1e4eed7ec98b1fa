// Package accuracy compares the numeric dumps of two runs tensor by
// tensor: .npy arrays matched by relative path, each pair's shapes, the
// largest absolute and relative errors, the mean absolute error, the
// cosine similarity, whether numpy.allclose would hold, and the first
// index where it does not. Arrays are streamed element by element, so a
// dump larger than memory compares in constant space.
//
// Missing counterparts and mismatched shapes are listed in the report,
// not errors: a comparison across frameworks usually has some.
package accuracy
