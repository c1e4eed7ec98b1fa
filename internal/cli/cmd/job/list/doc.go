// Package list implements `falcon job list`: one page of jobs, by
// experiment, statuses or cluster.
package list
