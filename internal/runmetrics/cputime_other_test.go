//go:build !unix

package runmetrics

import "time"

// cpuTime is unknown here; benchmarks then report wall time only.
func cpuTime() time.Duration { return 0 }
