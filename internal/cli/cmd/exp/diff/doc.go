// Package diff implements `falcon exp diff`: what differs between
// experiments' configs and specs, one row per key, one column per
// experiment.
package diff
