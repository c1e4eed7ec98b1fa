// Package list implements `falcon audit list`: one page of the audit log,
// newest first, filtered by experiment, actor or method.
package list
