package render

import (
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/accelerator"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/placement"
	falconvalidation "github.com/falconhq/falcon/internal/validation"
)

// Labels on the Job, its pods and its Service. Values are Falcon IDs and a
// role name, all valid label values. The kube provider lists Falcon's objects
// with LabelManagedBy and finds one job's pods with LabelJobID.
const (
	LabelManagedBy    = "app.kubernetes.io/managed-by"
	ManagedBy         = "falcon"
	ManagedBySelector = LabelManagedBy + "=" + ManagedBy

	LabelPrefix    = "falcon.dev/"
	LabelExpID     = LabelPrefix + "exp-id"
	LabelJobID     = LabelPrefix + "job-id"
	LabelClusterID = LabelPrefix + "cluster-id"
	LabelRole      = LabelPrefix + "role"
	// LabelSlice and LabelFirstRank are on the Jobs of a multi-slice job
	// and their pods: which slice a Job runs, and the Falcon rank of its
	// completion index 0, so a pod's rank is LabelFirstRank plus its index
	// (PodRank).
	LabelSlice     = LabelPrefix + "slice"
	LabelFirstRank = LabelPrefix + "first-rank"
)

// Annotations on the Job, for people reading `kubectl describe`; Falcon
// never reads them back.
const (
	AnnotationExpName     = LabelPrefix + "exp-name"
	AnnotationCreator     = LabelPrefix + "creator"
	AnnotationClusterName = LabelPrefix + "cluster-name"
)

// What the pod looks like from inside.
const (
	ContainerName = "task"
	ArtifactDir   = "/falcon/artifacts"
	LogDir        = "/falcon/logs"
	// JAXCoordinatorPort is where rank 0 serves jax.distributed: the port JAX
	// itself picks on TPU pods, so explicit and auto-detected setups agree.
	JAXCoordinatorPort = 8476
	// TerminationGracePeriod is long enough for a task to flush a profile or
	// a last log line after an abort, and short enough that an abort frees
	// the slice within a minute.
	TerminationGracePeriod = 60 * time.Second
)

// Environment variables Falcon sets. The first eight are
// validation.ReservedEnvs; the JAX ones only on multi-host slices.
const (
	EnvExpID       = "FALCON_EXP_ID"
	EnvJobID       = "FALCON_JOB_ID"
	EnvRole        = "FALCON_ROLE"
	EnvRank        = "FALCON_RANK"
	EnvWorldSize   = "FALCON_WORLD_SIZE"
	EnvArtifactDir = "FALCON_ARTIFACT_DIR"
	EnvArtifactAlt = "ARTIFACT_LOCAL_DIR"
	EnvConfig      = "CUSTOM_CONFIG_KEY"

	EnvJAXCoordinator  = "JAX_COORDINATOR_ADDRESS"
	EnvJAXProcessID    = "JAX_PROCESS_ID"
	EnvJAXNumProcesses = "JAX_NUM_PROCESSES"

	// JAX multislice's (validation.MultisliceEnvs), only on a multi-slice
	// job: every host of every slice gets the same coordinator, slice 0's
	// first host, and its own slice's index.
	EnvMegascaleCoordinator = "MEGASCALE_COORDINATOR_ADDRESS"
	EnvMegascalePort        = "MEGASCALE_PORT"
	EnvMegascaleNumSlices   = "MEGASCALE_NUM_SLICES"
	EnvMegascaleSliceID     = "MEGASCALE_SLICE_ID"
	// MegascalePort is the port JAX's multislice runtime uses by default.
	MegascalePort = 8081
)

// GCS FUSE CSI driver (GKE add-on) and the pod annotation that injects its
// sidecar.
const (
	GCSFuseDriver     = "gcsfuse.csi.storage.gke.io"
	GCSFuseAnnotation = "gke-gcsfuse/volumes"
)

const (
	volArtifacts = "falcon-artifacts"
	volLogs      = "falcon-logs"

	// rankField is the downward-API path of a pod's completion index.
	rankField = "metadata.annotations['" + batchv1.JobCompletionIndexAnnotation + "']"

	// maxArgBytes is Linux's limit on one argv or environment string
	// (MAX_ARG_STRLEN, 32 pages, counting the trailing NUL). A longer one
	// makes execve fail with E2BIG and the container never starts, so it is
	// caught here with a message instead.
	maxArgBytes = 128<<10 - 1

	defaultCPURequest    = "1"
	defaultMemoryRequest = "2Gi"
)

// Input is everything Render needs about one job and where it runs.
type Input struct {
	// Job is the Falcon job: id, exp_id, role, task_spec (command, replica,
	// image, envs, device_type, device_topo, device_count).
	Job *falconv1.Job
	// Config is the experiment's config string, handed to the task as
	// CUSTOM_CONFIG_KEY; empty falls back to Job.Config.
	Config string

	ClusterID   string // label value, required
	ClusterName string // annotation only
	Namespace   string // required
	// Bucket is the cluster's GCS bucket (a name, not a URL). Empty means no
	// GCS FUSE: the artifact dir is an emptyDir and logs are kubectl's only.
	Bucket string
	// NodePool, when set, pins the pods to that GKE node pool.
	NodePool string

	// ArtifactID and ArtifactPath fall back to the Job's. A gs:// path names
	// where the artifact dir is mounted from; any other path (a directory on
	// the Falcon server) is unreachable from a pod and is ignored in favour
	// of gs://<Bucket>/experiments/<exp>/artifacts/<ArtifactID>/.
	ArtifactID   string
	ArtifactPath string

	// ServiceAccount runs the pods; it needs read-write access to the bucket
	// through Workload Identity. Empty uses the namespace's default.
	ServiceAccount string
	// TTLAfterFinished deletes the Job this long after it finished; 0 keeps
	// it until Falcon deletes it.
	TTLAfterFinished time.Duration
}

// Objects are what Render produces for one job.
type Objects struct {
	// Jobs holds one Indexed Job per slice, in slice order (JobNames): one
	// for a task of one slice.
	Jobs []*batchv1.Job
	// Service is the headless Service of a multi-host or multi-slice job;
	// nil for one host.
	Service *corev1.Service
	// Slice is the checked placement the objects were built for: the node
	// pool a job needs is described by it.
	Slice accelerator.Slice
}

// Name is the name of the Kubernetes Job (and Service) of a Falcon job: the
// job ID itself, already a DNS label, so that a provider retrying after a
// crash finds the Job it created instead of creating another.
func Name(jobID string) string { return jobID }

// JobNames are the Kubernetes Jobs of a Falcon job over slices slices: the
// one Job named Name(jobID), or one per slice, <job ID>-s<slice>. The
// headless Service stays Name(jobID) and covers every slice's pods.
func JobNames(jobID string, slices int) []string {
	if slices <= 1 {
		return []string{Name(jobID)}
	}
	out := make([]string, slices)
	for i := range out {
		out[i] = Name(jobID) + "-s" + strconv.Itoa(i)
	}
	return out
}

// PodRank is the Falcon rank of a pod of one of a job's Jobs: its
// completion index, plus its slice's first rank on a multi-slice job; -1
// when the pod says neither. (A pod of a Job Falcon did not render has no
// first-rank label and counts from 0.)
func PodRank(p *corev1.Pod) int {
	index := CompletionIndex(p)
	if index < 0 {
		return -1
	}
	first, err := strconv.Atoi(p.Labels[LabelFirstRank])
	if err != nil || first < 0 {
		first = 0
	}
	return first + index
}

// CompletionIndex is a pod's index within its Indexed Job (the Job
// controller's annotation, or the label newer clusters also set); -1 when
// the pod carries neither.
func CompletionIndex(p *corev1.Pod) int {
	for _, v := range []string{p.Annotations[batchv1.JobCompletionIndexAnnotation], p.Labels[batchv1.JobCompletionIndexAnnotation]} {
		if n, err := strconv.Atoi(v); err == nil && n >= 0 {
			return n
		}
	}
	return -1
}

// Hostname is the hostname of a rank's pod, which an Indexed Job sets to
// <job name>-<index>.
func Hostname(jobID string, rank int) string { return Name(jobID) + "-" + strconv.Itoa(rank) }

// LogObject is the object name, in the cluster's bucket, of a rank's log.
func LogObject(jobID string, rank int) string {
	return "logs/" + jobID + "/" + Hostname(jobID, rank) + ".log"
}

// ArtifactPrefix is the object prefix of an artifact in a cluster's bucket,
// without a trailing slash.
func ArtifactPrefix(expID, artifactID string) string {
	return "experiments/" + expID + "/artifacts/" + artifactID
}

// CoordinatorAddress is the JAX coordinator of a multi-host job: rank 0's
// stable DNS name under the job's headless Service, and JAXCoordinatorPort.
func CoordinatorAddress(jobID string) string {
	return Hostname(jobID, 0) + "." + Name(jobID) + ":" + strconv.Itoa(JAXCoordinatorPort)
}

// sliceHost is the stable DNS name of index 0 of the Job named job, under
// the headless Service of jobID.
func sliceHost(job, jobID string) string { return job + "-0." + Name(jobID) }

// SetOwner makes job the owner of svc, so that deleting the Job (an abort,
// or its TTL) deletes the Service too. Call it with the Job as created,
// which has the UID Render cannot know.
func SetOwner(svc *corev1.Service, job *batchv1.Job) {
	ref := metav1.OwnerReference{
		APIVersion: batchv1.SchemeGroupVersion.String(), Kind: "Job",
		Name: job.Name, UID: job.UID,
	}
	for i, r := range svc.OwnerReferences {
		if r.UID == ref.UID {
			svc.OwnerReferences[i] = ref
			return
		}
	}
	svc.OwnerReferences = append(svc.OwnerReferences, ref)
}

// Render builds the objects for in. Problems with the task are
// errdefs.FieldErrors on paths relative to the task spec (image, replica,
// device_topo, envs.X, resources.limits.memory, ...), so a caller can prefix
// them with role_to_task_spec.<role>.; problems with the rest of the input
// are on job.id, namespace, bucket, service_account and so on.
func Render(in Input) (*Objects, error) {
	var errs errdefs.FieldErrors
	job := in.Job
	if job == nil {
		errs.Add("job", "is required")
		return nil, errs.Err()
	}
	task := job.GetTaskSpec()
	if task == nil {
		errs.Add("task_spec", "is required")
		return nil, errs.Err()
	}

	// The task, in the order of its fields.
	command := task.GetCommand()
	switch {
	case strings.TrimSpace(command) == "":
		errs.Add("command", "is required and must not be empty")
	case len(command) > maxArgBytes:
		errs.Add("command", "is %d bytes; Linux limits one command-line argument to %d (MAX_ARG_STRLEN): put the script in the image or the artifact dir and run it from there", len(command), maxArgBytes)
	}
	image := strings.TrimSpace(task.GetImage())
	if image == "" {
		errs.Add("image", "is required on a Kubernetes cluster: the container image the command runs in")
	}
	replica := int(task.GetReplica())
	if replica == 0 {
		replica = int(job.GetReplica())
	}
	slice, err := accelerator.Resolve(task.GetDeviceType(), task.GetDeviceTopo(), replica, int(task.GetDeviceCount()))
	if err != nil {
		appendErr(&errs, err)
	}
	slices := placement.Slices(task)
	if slices > 1 && slice.Spec.Kind != accelerator.KindTPU {
		errs.Add("slices", "%d slices need a TPU device_type (JAX multislice joins TPU slices)", slices)
	}
	for _, k := range sortedKeys(task.GetEnvs()) {
		if msgs := validation.IsEnvVarName(k); len(msgs) > 0 {
			errs.Add("envs."+k, "is not a valid environment variable name: %s", strings.Join(msgs, "; "))
		} else if n := len(k) + 1 + len(task.GetEnvs()[k]); n > maxArgBytes {
			errs.Add("envs."+k, "is %d bytes; Linux limits one environment variable to %d (MAX_ARG_STRLEN)", n, maxArgBytes)
		}
	}

	// The job and where it runs.
	id := job.GetId()
	checkName(&errs, id, replica, slices)
	checkLabelValue(&errs, "job.exp_id", job.GetExpId(), true)
	checkLabelValue(&errs, "job.role", job.GetRole(), true)
	config := in.Config
	if config == "" {
		config = job.GetConfig()
	}
	if n := len(EnvConfig) + 1 + len(config); n > maxArgBytes {
		errs.Add("config", "is %d bytes; as %s it exceeds Linux's %d-byte limit on one environment variable (MAX_ARG_STRLEN): put large data in the artifact dir and reference it from the config", len(config), EnvConfig, maxArgBytes)
	}
	checkLabelValue(&errs, "cluster_id", in.ClusterID, true)
	if msgs := content.IsDNS1123Label(in.Namespace); len(msgs) > 0 {
		errs.Add("namespace", "%q is not a namespace name: %s", in.Namespace, strings.Join(msgs, "; "))
	}
	art, err := artifactLocation(in)
	if err != nil {
		appendErr(&errs, err)
	}
	if in.NodePool != "" {
		checkLabelValue(&errs, "node_pool", in.NodePool, false)
	}
	if sa := in.ServiceAccount; sa != "" {
		if msgs := content.IsDNS1123Subdomain(sa); len(msgs) > 0 {
			errs.Add("service_account", "%q is not a service account name: %s", sa, strings.Join(msgs, "; "))
		}
	}
	res, err := requirements(task.GetResources(), slice.Spec.Kind == accelerator.KindCPU)
	if err != nil {
		appendErr(&errs, err)
	}
	addAccelerator(&res, slice)
	if in.TTLAfterFinished < 0 {
		errs.Add("ttl_after_finished", "must not be negative, got %s", in.TTLAfterFinished)
	}
	if err := errs.Err(); err != nil {
		return nil, err
	}

	r := renderer{in: in, job: job, task: task, id: id, replica: replica, slices: slices, slice: slice,
		image: image, command: command, config: config, art: art, res: res}
	return r.objects(), nil
}

// renderer holds the checked input while the objects are built.
type renderer struct {
	in      Input
	job     *falconv1.Job
	task    *falconv1.TaskSpec
	id      string
	replica int // hosts per slice
	slices  int
	slice   accelerator.Slice
	image   string
	command string
	config  string
	art     gcsLocation // zero: emptyDir
	res     corev1.ResourceRequirements
}

// multiHost: the ranks need stable DNS names (a headless Service) to find
// a coordinator, their slice's or slice 0's.
func (r renderer) multiHost() bool { return r.replica > 1 || r.slices > 1 }

func (r renderer) objects() *Objects {
	out := &Objects{Slice: r.slice}
	for i, name := range JobNames(r.id, r.slices) {
		out.Jobs = append(out.Jobs, r.job1(i, name))
	}
	if r.multiHost() {
		out.Service = &corev1.Service{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
			ObjectMeta: metav1.ObjectMeta{
				Name: Name(r.id), Namespace: r.in.Namespace, Labels: r.jobLabels(),
			},
			Spec: corev1.ServiceSpec{
				ClusterIP: corev1.ClusterIPNone,
				Selector:  map[string]string{LabelJobID: r.id},
				// Ranks look each other up while starting, before any is Ready.
				PublishNotReadyAddresses: true,
			},
		}
	}
	return out
}

// job1 is the Indexed Job of slice s, named name.
func (r renderer) job1(s int, name string) *batchv1.Job {
	labels := r.labels(s)
	annotations := map[string]string{}
	for k, v := range map[string]string{
		AnnotationExpName: r.job.GetExpName(), AnnotationCreator: r.job.GetCreator(), AnnotationClusterName: r.in.ClusterName,
	} {
		if v != "" {
			annotations[k] = v
		}
	}
	if len(annotations) == 0 {
		annotations = nil
	}

	spec := batchv1.JobSpec{
		Parallelism:    new(int32(r.replica)),
		Completions:    new(int32(r.replica)),
		CompletionMode: new(batchv1.IndexedCompletion),
		// A failed rank fails the Falcon job; the user reruns it.
		BackoffLimit: new(int32(0)),
		Template: corev1.PodTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Labels: r.labels(s), Annotations: r.podAnnotations()},
			Spec:       r.podSpec(s),
		},
	}
	if ttl := r.in.TTLAfterFinished; ttl > 0 {
		secs := min((ttl+time.Second-1)/time.Second, math.MaxInt32) // never round down to "at once"
		spec.TTLSecondsAfterFinished = new(int32(secs))
	}
	return &batchv1.Job{
		TypeMeta: metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: r.in.Namespace, Labels: labels, Annotations: annotations,
		},
		Spec: spec,
	}
}

// jobLabels are on every object of the job.
func (r renderer) jobLabels() map[string]string {
	return map[string]string{
		LabelManagedBy: ManagedBy,
		LabelExpID:     r.job.GetExpId(),
		LabelJobID:     r.id,
		LabelClusterID: r.in.ClusterID,
		LabelRole:      r.job.GetRole(),
	}
}

// labels are on slice s's Job and its pods.
func (r renderer) labels(s int) map[string]string {
	l := r.jobLabels()
	if r.slices > 1 {
		l[LabelSlice] = strconv.Itoa(s)
		l[LabelFirstRank] = strconv.Itoa(s * r.replica)
	}
	return l
}

func (r renderer) podAnnotations() map[string]string {
	if r.in.Bucket == "" && r.art.bucket == "" {
		return nil
	}
	return map[string]string{GCSFuseAnnotation: "true"}
}

func (r renderer) podSpec(s int) corev1.PodSpec {
	spec := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		EnableServiceLinks:            new(false),
		TerminationGracePeriodSeconds: new(int64(TerminationGracePeriod / time.Second)),
		ServiceAccountName:            r.in.ServiceAccount,
		// Tasks do not talk to the Kubernetes API; GCS access goes through
		// Workload Identity's metadata server, not this token.
		AutomountServiceAccountToken: new(false),
		Containers:                   []corev1.Container{r.container(s)},
		Volumes:                      r.volumes(),
	}
	if r.multiHost() {
		spec.Subdomain = Name(r.id)
	}
	if len(r.slice.NodeSelector) > 0 || r.in.NodePool != "" {
		spec.NodeSelector = map[string]string{}
		for k, v := range r.slice.NodeSelector {
			spec.NodeSelector[k] = v
		}
		if r.in.NodePool != "" {
			pool := r.in.NodePool
			if r.slices > 1 {
				pool = placement.SlicePool(pool, s) // each slice its own pool
			}
			spec.NodeSelector[accelerator.LabelNodePool] = pool
		}
	}
	if t := r.slice.Toleration; t != nil {
		spec.Tolerations = []corev1.Toleration{{
			Key: t.Key, Operator: corev1.TolerationOperator(t.Operator), Effect: corev1.TaintEffect(t.Effect),
		}}
	}
	return spec
}

func (r renderer) container(s int) corev1.Container {
	c := corev1.Container{
		Name:      ContainerName,
		Image:     r.image,
		Command:   []string{"/bin/sh", "-c"},
		Env:       r.env(s),
		Resources: r.res,
		VolumeMounts: []corev1.VolumeMount{
			{Name: volArtifacts, MountPath: ArtifactDir},
		},
	}
	switch {
	case r.in.Bucket != "":
		c.Args = []string{literal(r.rankPrelude(s) + logWrapper(LogDir, logDrain)), "falcon-task", literal(r.command)}
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: volLogs, MountPath: LogDir})
	case r.slices > 1:
		c.Args = []string{literal(r.rankPrelude(s) + `exec /bin/sh -c "$1"` + "\n"), "falcon-task", literal(r.command)}
	default:
		c.Args = []string{literal(r.command)}
	}
	return c
}

// rankPrelude sets FALCON_RANK on a multi-slice job, where it is the
// slice's first rank plus the pod's completion index: the downward API
// gives the index but cannot add, so the container's shell does before
// the task's command starts (and before the log wrapper names the rank's
// log file after it), from the index the container's FALCON_RANK holds;
// JAX_PROCESS_ID is the same rank. A command opened later by exec would
// see the container's values, the index within the slice, so the API
// server sets both for it (podexec.InRank).
func (r renderer) rankPrelude(s int) string {
	if r.slices <= 1 {
		return ""
	}
	return EnvRank + "=$((" + EnvRank + " + " + strconv.Itoa(s*r.replica) + "))\n" +
		EnvJAXProcessID + "=$" + EnvRank + "\nexport " + EnvRank + " " + EnvJAXProcessID + "\n"
}

// logDrain is how long the log wrapper lets tee copy what is left in the
// FIFO after the command exited, before giving up on it.
const logDrain = 10 * time.Second

// logWrapper is the script that runs the user's command ($1) with its output
// copied to the rank's log file in logDir and to the container's stdout, and
// exits with the command's status. See the package comment for why it is
// shaped like this. Render escapes it with literal like any other argument.
func logWrapper(logDir string, drain time.Duration) string {
	return `log="` + logDir + `/${FALCON_JOB_ID}-${FALCON_RANK}.log"
fifo="/tmp/falcon-output-$$"
rm -f "$fifo"
if ! mkfifo "$fifo"; then
  echo "falcon: cannot create $fifo; output is not copied to $log" >&2
  exec /bin/sh -c "$1"
fi
tee -a "$log" <"$fifo" &
tee_pid=$!
/bin/sh -c "$1" >"$fifo" 2>&1 &
pid=$!
trap 'kill -TERM "$pid" 2>/dev/null' TERM INT
wait "$pid"
rc=$?
while kill -0 "$pid" 2>/dev/null; do wait "$pid"; rc=$?; done
(sleep ` + strconv.Itoa(int(drain/time.Second)) + `; kill "$tee_pid" 2>/dev/null) >/dev/null 2>&1 &
drain_pid=$!
wait "$tee_pid"
kill "$drain_pid" 2>/dev/null
rm -f "$fifo"
exit "$rc"
`
}

func (r renderer) env(s int) []corev1.EnvVar {
	rank := &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: rankField}}
	world := strconv.Itoa(r.replica * r.slices)
	hosts := strconv.Itoa(r.replica)
	names := JobNames(r.id, r.slices)
	env := []corev1.EnvVar{
		{Name: EnvExpID, Value: literal(r.job.GetExpId())},
		{Name: EnvJobID, Value: literal(r.id)},
		{Name: EnvRole, Value: literal(r.job.GetRole())},
		{Name: EnvRank, ValueFrom: rank},
		{Name: EnvWorldSize, Value: world},
		{Name: EnvArtifactDir, Value: ArtifactDir},
		{Name: EnvArtifactAlt, Value: ArtifactDir},
		{Name: EnvConfig, Value: literal(r.config)},
	}
	switch {
	case r.slices > 1:
		// One jax.distributed over every host of every slice, as JAX's
		// own Cloud TPU detection sets it up for multislice: its
		// coordinator is slice 0's first host (the MEGASCALE
		// coordinator's host) and a process's ID its rank across slices,
		// which the prelude sets (rankPrelude). Coordinators per slice
		// would split the job into one JAX cluster per slice.
		env = append(env,
			corev1.EnvVar{Name: EnvJAXCoordinator, Value: sliceHost(names[0], r.id) + ":" + strconv.Itoa(JAXCoordinatorPort)},
			corev1.EnvVar{Name: EnvJAXProcessID, ValueFrom: rank.DeepCopy()},
			corev1.EnvVar{Name: EnvJAXNumProcesses, Value: world},
		)
	case r.replica > 1:
		env = append(env,
			corev1.EnvVar{Name: EnvJAXCoordinator, Value: CoordinatorAddress(r.id)},
			corev1.EnvVar{Name: EnvJAXProcessID, ValueFrom: rank.DeepCopy()},
			corev1.EnvVar{Name: EnvJAXNumProcesses, Value: hosts},
		)
	}
	if r.slices > 1 {
		port := strconv.Itoa(MegascalePort)
		env = append(env,
			corev1.EnvVar{Name: EnvMegascaleCoordinator, Value: sliceHost(names[0], r.id) + ":" + port},
			corev1.EnvVar{Name: EnvMegascalePort, Value: port},
			corev1.EnvVar{Name: EnvMegascaleNumSlices, Value: strconv.Itoa(r.slices)},
			corev1.EnvVar{Name: EnvMegascaleSliceID, Value: strconv.Itoa(s)},
		)
	}
	ours := make([]string, len(env))
	for i, e := range env {
		ours[i] = e.Name
	}
	envs := r.task.GetEnvs()
	for _, k := range sortedKeys(envs) {
		if slices.Contains(ours, k) {
			continue // Falcon's identity and paths are always the truth
		}
		env = append(env, corev1.EnvVar{Name: k, Value: literal(envs[k])})
	}
	return env
}

func (r renderer) volumes() []corev1.Volume {
	var vols []corev1.Volume
	if r.art.bucket != "" {
		vols = append(vols, fuseVolume(volArtifacts, r.art.bucket, "implicit-dirs,only-dir="+r.art.prefix))
	} else {
		vols = append(vols, corev1.Volume{Name: volArtifacts, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
	}
	if r.in.Bucket != "" {
		vols = append(vols, fuseVolume(volLogs, r.in.Bucket, "only-dir=logs/"+r.id))
	}
	return vols
}

func fuseVolume(name, bucket, mountOptions string) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
		Driver:           GCSFuseDriver,
		VolumeAttributes: map[string]string{"bucketName": bucket, "mountOptions": mountOptions},
	}}}
}

// literal escapes s for a container's command, args or env value, where the
// kubelet replaces $(VAR) and turns $$ into $: doubling every $ makes the
// process see exactly s.
func literal(s string) string { return strings.ReplaceAll(s, "$", "$$") }

// gcsLocation is a prefix in a bucket; the zero value means none.
type gcsLocation struct{ bucket, prefix string }

var (
	// bucketName follows GCS's naming rules, dotted names included.
	bucketName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{1,220}[a-z0-9]$`)
	// objectPrefix is what Falcon writes into mount options: no commas (the
	// option separator), no empty, . or .. segments.
	objectPrefix = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9._-]*(/[A-Za-z0-9_-][A-Za-z0-9._-]*)*$`)
)

// artifactLocation decides where the artifact dir is mounted from: the
// job's gs:// artifact path, else the conventional prefix in the cluster's
// bucket, else nowhere (an emptyDir).
func artifactLocation(in Input) (gcsLocation, error) {
	var errs errdefs.FieldErrors
	if in.Bucket != "" && !bucketName.MatchString(in.Bucket) {
		errs.Add("bucket", "%q is not a GCS bucket name (lower-case letters, digits, '-', '_' and '.'; give the name, not a gs:// URL)", in.Bucket)
	}
	path := in.ArtifactPath
	if path == "" {
		path = in.Job.GetArtifactPath()
	}
	artID := in.ArtifactID
	if artID == "" {
		artID = in.Job.GetArtifactId()
	}
	var loc gcsLocation
	if rest, ok := strings.CutPrefix(path, "gs://"); ok {
		b, p, _ := strings.Cut(rest, "/")
		loc = gcsLocation{bucket: b, prefix: strings.Trim(p, "/")}
		if !bucketName.MatchString(loc.bucket) {
			errs.Add("artifact_path", "%q does not name a valid GCS bucket", path)
		}
		if !objectPrefix.MatchString(loc.prefix) {
			errs.Add("artifact_path", "%q must be gs://<bucket>/<prefix> with a prefix of letters, digits, '.', '_', '-' and '/'", path)
		}
	} else if in.Bucket != "" {
		if msgs := content.IsLabelValue(artID); artID == "" || len(msgs) > 0 {
			errs.Add("artifact_id", "%q cannot name the artifact's prefix in bucket %s; a Falcon artifact ID (art-...) is required", artID, in.Bucket)
		}
		loc = gcsLocation{bucket: in.Bucket, prefix: ArtifactPrefix(in.Job.GetExpId(), artID)}
	}
	if err := errs.Err(); err != nil {
		return gcsLocation{}, err
	}
	return loc, nil
}

// requirements turns the task's resources (task_spec.resources) into the
// container's. As in Kubernetes, a limit given alone is also the request.
//
// For a CPU-only job an empty CPU request defaults to 1 CPU, an empty memory
// request to 2Gi and an empty memory limit to the memory request; the CPU
// limit stays unset unless given, so a task is never throttled below what
// the node has spare. For accelerator jobs only the values given are set: a
// TPU or GPU host's CPU and memory come with it, and the accelerator itself
// (google.com/tpu, nvidia.com/gpu) is always the slice's (addAccelerator),
// never anything a task wrote.
//
// The task's resources were validated when the experiment was created; they
// are checked again with the same rules (a limit below its request among
// them) because a stored row is not proof of that.
func requirements(task *falconv1.Resources, cpuOnly bool) (corev1.ResourceRequirements, error) {
	taskReq, taskLim, err := falconvalidation.ParseResources("resources", task)
	if err != nil {
		return corev1.ResourceRequirements{}, err
	}
	var out corev1.ResourceRequirements
	set := func(list *corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) {
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[name] = q
	}
	for name, q := range taskReq {
		set(&out.Requests, corev1.ResourceName(name), q)
	}
	for name, q := range taskLim {
		set(&out.Limits, corev1.ResourceName(name), q)
		if _, ok := taskReq[name]; !ok {
			set(&out.Requests, corev1.ResourceName(name), q.DeepCopy())
		}
	}
	if cpuOnly {
		cpu, mem := corev1.ResourceCPU, corev1.ResourceMemory
		if _, ok := out.Requests[cpu]; !ok {
			set(&out.Requests, cpu, resource.MustParse(defaultCPURequest))
		}
		if _, ok := out.Requests[mem]; !ok {
			set(&out.Requests, mem, resource.MustParse(defaultMemoryRequest))
		}
		if _, ok := out.Limits[mem]; !ok {
			set(&out.Limits, mem, out.Requests[mem].DeepCopy())
		}
	}
	return out, nil
}

// addAccelerator requests the slice's accelerator on each pod. Extended
// resources cannot be overcommitted, so requests and limits are equal.
func addAccelerator(res *corev1.ResourceRequirements, sl accelerator.Slice) {
	if sl.ResourceName == "" || sl.ResourcePerHost == 0 {
		return
	}
	q := *resource.NewQuantity(int64(sl.ResourcePerHost), resource.DecimalSI)
	for _, list := range []*corev1.ResourceList{&res.Requests, &res.Limits} {
		if *list == nil {
			*list = corev1.ResourceList{}
		}
		(*list)[corev1.ResourceName(sl.ResourceName)] = q.DeepCopy()
	}
}

// checkName checks that the job ID can be the Job's name and, as the last
// slice's Job name with the highest index appended, its pods' hostname (a
// DNS label of 63 characters).
func checkName(errs *errdefs.FieldErrors, id string, replica, slices int) {
	// DNS-1035 (a letter first) because the same name is the Service's.
	if msgs := validation.IsDNS1035Label(id); len(msgs) > 0 {
		errs.Add("job.id", "%q cannot name a Kubernetes Job and Service: %s", id, strings.Join(msgs, "; "))
		return
	}
	names := JobNames(id, slices)
	if host := names[len(names)-1] + "-" + strconv.Itoa(max(replica-1, 0)); len(host) > validation.DNS1123LabelMaxLength {
		errs.Add("job.id", "%q is too long: the pod hostname %s must be at most %d characters", id, host, validation.DNS1123LabelMaxLength)
	}
}

func checkLabelValue(errs *errdefs.FieldErrors, field, v string, required bool) {
	switch msgs := content.IsLabelValue(v); {
	case v == "" && required:
		errs.Add(field, "is required")
	case len(msgs) > 0:
		errs.Add(field, "%q is not a valid Kubernetes label value: %s", v, strings.Join(msgs, "; "))
	}
}

// appendErr adds the field errors in err to errs.
func appendErr(errs *errdefs.FieldErrors, err error) {
	switch e := err.(type) {
	case errdefs.FieldErrors:
		*errs = append(*errs, e...)
	case *errdefs.FieldError:
		*errs = append(*errs, e)
	default:
		errs.Add("", "%v", err)
	}
}

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}
