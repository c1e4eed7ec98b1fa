package sim

import (
	"bytes"
	"fmt"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/resourcemanager"
)

// Cluster is one simulated GKE cluster.
type Cluster struct {
	Name string
	// Accelerators maps each type offered to its registry priority (1 is
	// the most preferred).
	Accelerators  map[string]int
	MaxQueueDepth int
	// ReservationNodes is the default reservation's capacity in nodes (0:
	// none, every pool is flex-start).
	ReservationNodes int
	// PoolCreateMin and PoolCreateMax bound the uniform draw of a pool's
	// creation time (a job's trace pool_create wins).
	PoolCreateMin, PoolCreateMax time.Duration
	// PoolDelete is how long a deleted pool takes to go away.
	PoolDelete time.Duration
	// Stockout is the chance that a flex-start pool finds no capacity at
	// first and is ready only StockoutWait later.
	Stockout     float64
	StockoutWait time.Duration
}

// Config is a clusters file: the clusters and the manager's timing.
type Config struct {
	Clusters []Cluster
	Timing   resourcemanager.PoolTiming
}

type clusterFile struct {
	Clusters map[string]clusterYAML `yaml:"clusters"`
	Timing   *timingYAML            `yaml:"timing"`
}

type clusterYAML struct {
	AcceleratorTypes []struct {
		Type     string `yaml:"type"`
		Priority int    `yaml:"priority"`
	} `yaml:"accelerator_types"`
	MaxQueueDepth    int      `yaml:"max_queue_depth"`
	ReservationNodes int      `yaml:"reservation_nodes"`
	PoolCreate       []string `yaml:"pool_create"` // [min, max]
	PoolDelete       string   `yaml:"pool_delete"`
	FlexStockout     float64  `yaml:"flex_stockout"`
	StockoutWait     string   `yaml:"stockout_wait"`
}

type timingYAML struct {
	ListEvery   string `yaml:"list_every"`
	PollInitial string `yaml:"poll_initial"`
	PollMax     string `yaml:"poll_max"`
	Grace       string `yaml:"grace"`
}

// Defaults of a simulated cluster: GKE's 5-10 minutes to create a pool.
const (
	DefaultPoolCreateMin = 5 * time.Minute
	DefaultPoolCreateMax = 10 * time.Minute
	DefaultPoolDelete    = 2 * time.Minute
	DefaultStockoutWait  = 30 * time.Minute
)

// ParseClusters reads a clusters file:
//
//	clusters:
//	  v5p-east:
//	    accelerator_types: [{type: v5p, priority: 1}]
//	    max_queue_depth: 0
//	    reservation_nodes: 32        # 0: flex-start only
//	    pool_create: [5m, 10m]       # uniform
//	    pool_delete: 2m
//	    flex_stockout: 0.1           # chance a flex-start pool waits stockout_wait more
//	    stockout_wait: 30m
//	timing:                          # the manager's PoolTiming (default: the controller's)
//	  list_every: 30s
//	  poll_initial: 5s
//	  poll_max: 1m
//	  grace: 10m
//
// Unknown keys are refused.
func ParseClusters(data []byte) (Config, error) {
	var f clusterFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return Config{}, fmt.Errorf("clusters file: %w", err)
	}
	if len(f.Clusters) == 0 {
		return Config{}, fmt.Errorf("clusters file: clusters: at least one cluster is required")
	}
	cfg := Config{Timing: resourcemanager.DefaultPoolTiming}
	dur := func(field, s string, def time.Duration) (time.Duration, error) {
		if s == "" {
			return def, nil
		}
		d, err := time.ParseDuration(s)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("clusters file: %s: %q is not a duration (e.g. 30s, 5m)", field, s)
		}
		return d, nil
	}
	if t := f.Timing; t != nil {
		var err error
		for _, x := range []struct {
			field string
			s     string
			to    *time.Duration
		}{{"timing.list_every", t.ListEvery, &cfg.Timing.ListEvery}, {"timing.poll_initial", t.PollInitial, &cfg.Timing.PollInitial},
			{"timing.poll_max", t.PollMax, &cfg.Timing.PollMax}, {"timing.grace", t.Grace, &cfg.Timing.Grace}} {
			if *x.to, err = dur(x.field, x.s, *x.to); err != nil {
				return Config{}, err
			}
		}
	}
	names := make([]string, 0, len(f.Clusters))
	for n := range f.Clusters {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		y := f.Clusters[n]
		at := "clusters." + n
		c := Cluster{Name: n, Accelerators: map[string]int{}, MaxQueueDepth: y.MaxQueueDepth,
			ReservationNodes: y.ReservationNodes, Stockout: y.FlexStockout}
		if len(y.AcceleratorTypes) == 0 {
			return Config{}, fmt.Errorf("clusters file: %s.accelerator_types: at least one type is required", at)
		}
		for i, a := range y.AcceleratorTypes {
			spec, err := accelerator.Lookup(a.Type)
			if err != nil {
				return Config{}, fmt.Errorf("clusters file: %s.accelerator_types[%d].type: %v", at, i, err)
			}
			c.Accelerators[spec.Name] = max(a.Priority, 1)
		}
		var err error
		switch len(y.PoolCreate) {
		case 0:
			c.PoolCreateMin, c.PoolCreateMax = DefaultPoolCreateMin, DefaultPoolCreateMax
		case 2:
			if c.PoolCreateMin, err = dur(at+".pool_create[0]", y.PoolCreate[0], 0); err != nil {
				return Config{}, err
			}
			if c.PoolCreateMax, err = dur(at+".pool_create[1]", y.PoolCreate[1], 0); err != nil {
				return Config{}, err
			}
			if c.PoolCreateMax < c.PoolCreateMin {
				return Config{}, fmt.Errorf("clusters file: %s.pool_create: [min, max] with min <= max, got %v", at, y.PoolCreate)
			}
		default:
			return Config{}, fmt.Errorf("clusters file: %s.pool_create: [min, max], e.g. [5m, 10m]; got %v", at, y.PoolCreate)
		}
		if c.PoolDelete, err = dur(at+".pool_delete", y.PoolDelete, DefaultPoolDelete); err != nil {
			return Config{}, err
		}
		if c.StockoutWait, err = dur(at+".stockout_wait", y.StockoutWait, DefaultStockoutWait); err != nil {
			return Config{}, err
		}
		if c.Stockout < 0 || c.Stockout > 1 {
			return Config{}, fmt.Errorf("clusters file: %s.flex_stockout: a probability between 0 and 1, got %g", at, c.Stockout)
		}
		if c.ReservationNodes < 0 || c.MaxQueueDepth < 0 {
			return Config{}, fmt.Errorf("clusters file: %s: reservation_nodes and max_queue_depth must not be negative", at)
		}
		cfg.Clusters = append(cfg.Clusters, c)
	}
	return cfg, nil
}

// DefaultConfig is what falcon sim uses without --clusters: two clusters
// offering every accelerator the trace asks for, with room in their
// reservations for anything, pools created in 5-10 minutes, and the
// controller's own timing.
func DefaultConfig(trace []Job) Config { return DefaultConfigNamed(trace, nil) }

// DefaultConfigNamed is DefaultConfig with clusters of the given names
// (none: sim-a and sim-b): a replayed history's, so that jobs pinned to
// one of them find it.
func DefaultConfigNamed(trace []Job, names []string) Config {
	if len(names) == 0 {
		names = []string{"sim-a", "sim-b"}
	}
	acc := map[string]int{}
	for _, j := range trace {
		acc[j.Accelerator] = 1
	}
	cfg := Config{Timing: resourcemanager.DefaultPoolTiming}
	for _, n := range names {
		a := map[string]int{}
		for k, v := range acc {
			a[k] = v
		}
		cfg.Clusters = append(cfg.Clusters, Cluster{Name: n, Accelerators: a, ReservationNodes: 1 << 20,
			PoolCreateMin: DefaultPoolCreateMin, PoolCreateMax: DefaultPoolCreateMax, PoolDelete: DefaultPoolDelete, StockoutWait: DefaultStockoutWait})
	}
	return cfg
}

// Check refuses a configuration that offers nothing some of the trace asks
// for, naming each shape nobody offers (or the pinned cluster missing).
func (cfg Config) Check(trace []Job) error {
	byName := map[string]Cluster{}
	for _, c := range cfg.Clusters {
		byName[c.Name] = c
	}
	var missing []string
	seen := map[string]bool{}
	for _, j := range trace {
		key := j.Accelerator + " " + j.Topology + " @" + j.Cluster
		if seen[key] {
			continue
		}
		seen[key] = true
		ok := false
		if j.Cluster != "" {
			c, found := byName[j.Cluster]
			if !found {
				missing = append(missing, fmt.Sprintf("%s %s pinned to cluster %s, which the clusters file does not have", j.Accelerator, j.Topology, j.Cluster))
				continue
			}
			_, ok = c.Accelerators[j.Accelerator]
		} else {
			for _, c := range cfg.Clusters {
				if _, has := c.Accelerators[j.Accelerator]; has {
					ok = true
				}
			}
		}
		if !ok {
			where := "no cluster"
			if j.Cluster != "" {
				where = "cluster " + j.Cluster
			}
			missing = append(missing, fmt.Sprintf("%s %s: %s offers %s", j.Accelerator, j.Topology, where, j.Accelerator))
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return fmt.Errorf("the clusters offer nothing for part of the trace:\n  %s", strings.Join(missing, "\n  "))
	}
	return nil
}
