package store

// JobCount is how many live jobs (Pending, Running, Aborting) share a
// cluster, status and reason, for the jobs gauge the API server exports.
type JobCount struct {
	Cluster string
	Status  string
	Reason  string
	N       int64
}
