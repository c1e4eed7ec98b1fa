// Package npy reads NumPy's .npy files of floating-point arrays (float16,
// float32, float64 and bfloat16) as float64 values, streaming, for
// comparing the numeric dumps of two runs.
//
// bfloat16 has no NumPy dtype of its own: arrays of ml_dtypes.bfloat16
// (what JAX uses) are saved with the descr "bfloat16" by some writers and
// as the two-byte void "<V2" by np.save, which keeps only the size. Both
// are read as bfloat16, the only two-byte float that is stored as void.
package npy
