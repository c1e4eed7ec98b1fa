// Package job groups the job commands (`falcon job ...`). A job is one role
// of an experiment placed on a cluster; looking at jobs directly answers
// "why is this still Pending" and "which of my jobs run on that cluster".
package job
