// Package abort implements `falcon exp abort`: stop one or more
// experiments and free their slices. Aborting an experiment that already
// ended is not an error (scripts abort in cleanup handlers); it reports that
// nothing changed. --force ends them Aborted at once, for clusters that will
// never confirm the stop.
package abort
