package placement

import (
	"slices"
	"strings"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/clusterconfig"
)

// The limits a task's command line and environment meet on the way to a
// process.
const (
	// MaxArgStrlen is Linux's MAX_ARG_STRLEN: the longest single argument
	// or environment string execve accepts, its terminating NUL included
	// (32 pages of 4 KiB). Every backend runs a task's command as one
	// argument of /bin/sh -c, so it bounds every command; a longer one makes
	// execve fail with E2BIG and the task never starts.
	MaxArgStrlen = 32 * 4096
	// ArgMax is what execve takes in all: every argument and environment
	// string with its NUL, plus a pointer to each. Linux allows a quarter of
	// the stack limit, and this is the default 8 MiB stack's (getconf
	// ARG_MAX prints 2097152); a larger ulimit -s on the controller's
	// machine allows more, which the API server cannot see.
	ArgMax = 2 << 20
	// MaxObjectBytes is the largest object a Kubernetes cluster stores:
	// etcd's default --max-request-bytes, 1.5 MiB. A Job carries the
	// command, the envs and the config in its pod template; a larger one is
	// refused at dispatch.
	MaxObjectBytes = 3 << 19
)

// pointerBytes is what execve counts for each string's pointer in argv and
// envp (64-bit machines).
const pointerBytes = 8

// Backend is what one backend needs of a task.
type Backend struct {
	Name string
	// NeedsImage: the backend runs the task in a container, and a container
	// needs an image. The local backend runs it as processes on the
	// controller's machine, with no image.
	NeedsImage bool
	// Size is how many bytes of the task reach the backend's Limit, at
	// least: what the task brings, without what Falcon or the machine add
	// (Falcon's own variables, the controller's environment, the rest of a
	// Job), which the API server cannot know. Counting only what is certain
	// means a task is refused only when it cannot possibly run.
	Size func(t *falconv1.TaskSpec, config string) int
	// Limit bounds Size; LimitName names it in messages.
	Limit     int
	LimitName string
}

// BackendOf returns what the named backend needs of a task. A backend
// unknown here (a test's) is reported as not found and needs nothing that
// is checked.
func BackendOf(name string) (Backend, bool) {
	b, ok := backends[name]
	return b, ok
}

var backends = map[string]Backend{
	clusterconfig.BackendLocal: {
		Name: clusterconfig.BackendLocal, Size: execBytes, Limit: ArgMax,
		LimitName: "Linux's ARG_MAX, the most one exec takes in arguments and environment together",
	},
	clusterconfig.BackendKubernetes: kubernetes(clusterconfig.BackendKubernetes),
	// GKE clusters run the very Job the kubernetes backend renders.
	clusterconfig.BackendGKE: kubernetes(clusterconfig.BackendGKE),
}

func kubernetes(name string) Backend {
	return Backend{
		Name: name, NeedsImage: true, Size: jobBytes, Limit: MaxObjectBytes,
		LimitName: "the largest object a Kubernetes cluster stores (etcd's request limit)",
	}
}

// execBytes counts what the local backend's exec of one rank takes from the
// task: /bin/sh -c "$command" as arguments, and the task's envs and the
// config (CUSTOM_CONFIG_KEY) in the environment.
func execBytes(t *falconv1.TaskSpec, config string) int {
	n := 0
	str := func(s string) { n += len(s) + 1 + pointerBytes }
	for _, a := range []string{"/bin/sh", "-c", t.GetCommand(), config} {
		str(a)
	}
	for k, v := range t.GetEnvs() {
		str(k + "=" + v)
	}
	return n
}

// jobBytes counts what a task puts in its Kubernetes Job: the command, the
// envs and the config, each with every $ doubled (the kubelet expands $(VAR)
// in commands and env values, so the renderer escapes them). The container's
// own exec is bounded by ArgMax too, but it sees the unescaped strings, fewer
// bytes under a larger limit: the Job's size is what binds.
func jobBytes(t *falconv1.TaskSpec, config string) int {
	escaped := func(s string) int { return len(s) + strings.Count(s, "$") }
	n := escaped(t.GetCommand()) + escaped(config)
	for k, v := range t.GetEnvs() {
		n += len(k) + escaped(v)
	}
	return n
}

// ImageNeeders returns the names of the clusters among cs whose backend
// needs an image, and whether all of them do (false for no clusters): only
// then can a task without an image not run.
func ImageNeeders(cs []*falconv1.Cluster) (names []string, all bool) {
	for _, c := range cs {
		if b, _ := BackendOf(c.GetBackend()); b.NeedsImage {
			names = append(names, c.GetName())
		}
	}
	return names, len(cs) > 0 && len(names) == len(cs)
}

// Overflow is a backend's limit that a task exceeds.
type Overflow struct {
	Backend  Backend
	Clusters []string // the candidates on that backend
	Size     int
}

// Overflows returns, per backend of the clusters cs, the limit a task
// exceeds there, and whether it exceeds one on every cluster (false for no
// clusters): only then can it not run wherever it is placed.
func Overflows(cs []*falconv1.Cluster, t *falconv1.TaskSpec, config string) (out []Overflow, all bool) {
	fits := false
	for _, c := range cs {
		b, ok := BackendOf(c.GetBackend())
		if !ok || b.Size == nil {
			fits = true
			continue
		}
		size := b.Size(t, config)
		if size <= b.Limit {
			fits = true
			continue
		}
		if i := slices.IndexFunc(out, func(o Overflow) bool { return o.Backend.Name == b.Name }); i >= 0 {
			out[i].Clusters = append(out[i].Clusters, c.GetName())
			continue
		}
		out = append(out, Overflow{Backend: b, Clusters: []string{c.GetName()}, Size: size})
	}
	return out, len(out) > 0 && !fits
}
