//go:build !unix

package queue_test

import "time"

// cpuTime is unknown here; benchmarks then report wall time only.
func cpuTime() time.Duration { return 0 }
