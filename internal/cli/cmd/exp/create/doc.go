// Package create implements `falcon exp create`: submit an experiment from a
// manifest (-f) or from the older flag form that existing scripts use.
package create
