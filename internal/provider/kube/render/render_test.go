package render

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/api/validate/content"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metavalidation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/types"
	k8svalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/validation"
)

const (
	jobID  = "job-abc123xyz0"
	expID  = "exp-q7odgo8q9x"
	artID  = "art-1t44htxy4y"
	bucket = "falcon-edge-a"
)

// v7xJob is the USERS.md example: a v7x 2x2x4 slice, four hosts of 8 devices.
func v7xJob() *falconv1.Job {
	return &falconv1.Job{
		Id: jobID, ExpId: expID, ExpName: "qwen-profiling-003", Role: "worker", Creator: "ana@example.com",
		ArtifactId: artID, ArtifactPath: "gs://" + bucket + "/experiments/" + expID + "/artifacts/" + artID + "/",
		Config: "model: qwen\nbatch: 8\n",
		TaskSpec: &falconv1.TaskSpec{
			Command: "python train.py", Replica: 4, Image: "us-docker.pkg.dev/p/r/jax:0.6",
			DeviceType: "v7x", DeviceTopo: "2x2x4", DeviceCount: 8,
			Envs: map[string]string{"LOG_LEVEL": "info", "XLA_FLAGS": "--xla_dump_to=/tmp/x"},
		},
	}
}

func input(j *falconv1.Job) Input {
	return Input{
		Job: j, ClusterID: "cl-v5l8pq8yso", ClusterName: "tpuv7x-64-node", Namespace: "falcon",
		Bucket: bucket, NodePool: "falcon-v7x-2x2x4-a", ServiceAccount: "falcon-job",
	}
}

func render(t *testing.T, in Input) *Objects {
	t.Helper()
	objs, err := Render(in)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	validateObjects(t, objs)
	return objs
}

func wantLabels() map[string]string {
	return map[string]string{
		"app.kubernetes.io/managed-by": "falcon",
		"falcon.dev/exp-id":            expID,
		"falcon.dev/job-id":            jobID,
		"falcon.dev/cluster-id":        "cl-v5l8pq8yso",
		"falcon.dev/role":              "worker",
	}
}

func rankEnv(name string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{
		FieldPath: "metadata.annotations['batch.kubernetes.io/job-completion-index']",
	}}}
}

func quantities(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func TestRenderIsDeterministic(t *testing.T) {
	j := v7xJob()
	for i := range 50 { // map order differs run to run; the output must not
		j.TaskSpec.Envs["VAR_"+string(rune('A'+i%26))+string(rune('a'+i/26))] = "v"
	}
	first := render(t, input(j))
	for range 5 {
		again := render(t, input(j))
		if diff := cmp.Diff(first, again); diff != "" {
			t.Fatalf("rendering twice differs (-first +again):\n%s", diff)
		}
	}
	if first.Jobs[0].Name != jobID || first.Service.Name != jobID {
		t.Errorf("names = %s, %s; want the job ID %s for both", first.Jobs[0].Name, first.Service.Name, jobID)
	}
}

func TestRenderV7xMultiHost(t *testing.T) {
	objs := render(t, input(v7xJob()))
	job := objs.Jobs[0]

	if diff := cmp.Diff(metav1.ObjectMeta{
		Name: jobID, Namespace: "falcon", Labels: wantLabels(),
		Annotations: map[string]string{
			"falcon.dev/exp-name": "qwen-profiling-003", "falcon.dev/creator": "ana@example.com",
			"falcon.dev/cluster-name": "tpuv7x-64-node",
		},
	}, job.ObjectMeta); diff != "" {
		t.Errorf("Job metadata (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(metav1.TypeMeta{APIVersion: "batch/v1", Kind: "Job"}, job.TypeMeta); diff != "" {
		t.Errorf("Job TypeMeta (-want +got):\n%s", diff)
	}

	spec := job.Spec
	spec.Template = corev1.PodTemplateSpec{}
	if diff := cmp.Diff(batchv1.JobSpec{
		Parallelism: new(int32(4)), Completions: new(int32(4)),
		CompletionMode: new(batchv1.IndexedCompletion), BackoffLimit: new(int32(0)),
	}, spec); diff != "" {
		t.Errorf("JobSpec (-want +got):\n%s", diff)
	}

	tmpl := job.Spec.Template
	if diff := cmp.Diff(metav1.ObjectMeta{
		Labels:      wantLabels(),
		Annotations: map[string]string{"gke-gcsfuse/volumes": "true"},
	}, tmpl.ObjectMeta); diff != "" {
		t.Errorf("pod template metadata (-want +got):\n%s", diff)
	}

	pod := tmpl.Spec
	pod.Containers = nil
	wantPod := corev1.PodSpec{
		RestartPolicy:                 corev1.RestartPolicyNever,
		Subdomain:                     jobID,
		EnableServiceLinks:            new(false),
		TerminationGracePeriodSeconds: new(int64(60)),
		ServiceAccountName:            "falcon-job",
		AutomountServiceAccountToken:  new(false),
		NodeSelector: map[string]string{
			"cloud.google.com/gke-tpu-accelerator": "tpu7x",
			"cloud.google.com/gke-tpu-topology":    "2x2x4",
			"cloud.google.com/gke-nodepool":        "falcon-v7x-2x2x4-a",
		},
		Tolerations: []corev1.Toleration{{Key: "google.com/tpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		Volumes: []corev1.Volume{
			{Name: "falcon-artifacts", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver: "gcsfuse.csi.storage.gke.io",
				VolumeAttributes: map[string]string{
					"bucketName":   bucket,
					"mountOptions": "implicit-dirs,only-dir=experiments/" + expID + "/artifacts/" + artID,
				},
			}}},
			{Name: "falcon-logs", VolumeSource: corev1.VolumeSource{CSI: &corev1.CSIVolumeSource{
				Driver:           "gcsfuse.csi.storage.gke.io",
				VolumeAttributes: map[string]string{"bucketName": bucket, "mountOptions": "only-dir=logs/" + jobID},
			}}},
		},
	}
	if diff := cmp.Diff(wantPod, pod); diff != "" {
		t.Errorf("PodSpec (-want +got):\n%s", diff)
	}

	if len(tmpl.Spec.Containers) != 1 {
		t.Fatalf("%d containers, want 1", len(tmpl.Spec.Containers))
	}
	c := tmpl.Spec.Containers[0]
	wantC := corev1.Container{
		Name: "task", Image: "us-docker.pkg.dev/p/r/jax:0.6",
		Command: []string{"/bin/sh", "-c"},
		Args:    []string{literal(logWrapper("/falcon/logs", logDrain)), "falcon-task", "python train.py"},
		Env: []corev1.EnvVar{
			{Name: "FALCON_EXP_ID", Value: expID},
			{Name: "FALCON_JOB_ID", Value: jobID},
			{Name: "FALCON_ROLE", Value: "worker"},
			rankEnv("FALCON_RANK"),
			{Name: "FALCON_WORLD_SIZE", Value: "4"},
			{Name: "FALCON_ARTIFACT_DIR", Value: "/falcon/artifacts"},
			{Name: "ARTIFACT_LOCAL_DIR", Value: "/falcon/artifacts"},
			{Name: "CUSTOM_CONFIG_KEY", Value: "model: qwen\nbatch: 8\n"},
			{Name: "JAX_COORDINATOR_ADDRESS", Value: "job-abc123xyz0-0.job-abc123xyz0:8476"},
			rankEnv("JAX_PROCESS_ID"),
			{Name: "JAX_NUM_PROCESSES", Value: "4"},
			{Name: "LOG_LEVEL", Value: "info"},
			{Name: "XLA_FLAGS", Value: "--xla_dump_to=/tmp/x"},
		},
		Resources: corev1.ResourceRequirements{
			Requests: quantities("google.com/tpu", "4"),
			Limits:   quantities("google.com/tpu", "4"),
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "falcon-artifacts", MountPath: "/falcon/artifacts"},
			{Name: "falcon-logs", MountPath: "/falcon/logs"},
		},
	}
	if diff := cmp.Diff(wantC, c); diff != "" {
		t.Errorf("container (-want +got):\n%s", diff)
	}

	if diff := cmp.Diff(&corev1.Service{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{Name: jobID, Namespace: "falcon", Labels: wantLabels()},
		Spec: corev1.ServiceSpec{
			ClusterIP: "None", Selector: map[string]string{"falcon.dev/job-id": jobID},
			PublishNotReadyAddresses: true,
		},
	}, objs.Service); diff != "" {
		t.Errorf("Service (-want +got):\n%s", diff)
	}

	if s := objs.Slice; s.Hosts != 4 || s.ChipsPerHost != 4 || s.DevicesPerHost != 8 || s.MachineType != "tpu7x-standard-4t" {
		t.Errorf("Slice = %+v, want 4 hosts of tpu7x-standard-4t with 4 chips and 8 devices", s)
	}
}

func TestRenderV6eSingleHost(t *testing.T) {
	j := v7xJob()
	j.TaskSpec.DeviceType, j.TaskSpec.DeviceTopo, j.TaskSpec.Replica, j.TaskSpec.DeviceCount = "tpu-v6e", "2x2", 1, 4
	in := input(j)
	in.NodePool = ""
	in.TTLAfterFinished = 90 * time.Minute
	objs := render(t, in)

	if ttl := objs.Jobs[0].Spec.TTLSecondsAfterFinished; ttl == nil || *ttl != 5400 {
		t.Errorf("TTLSecondsAfterFinished = %v, want 5400", ttl)
	}
	if objs.Service != nil {
		t.Errorf("single-host job has a Service: %+v", objs.Service)
	}
	if c, p := *objs.Jobs[0].Spec.Completions, *objs.Jobs[0].Spec.Parallelism; c != 1 || p != 1 {
		t.Errorf("completions, parallelism = %d, %d; want 1, 1", c, p)
	}
	pod := objs.Jobs[0].Spec.Template.Spec
	if pod.Subdomain != "" {
		t.Errorf("Subdomain = %q, want none", pod.Subdomain)
	}
	if diff := cmp.Diff(map[string]string{
		"cloud.google.com/gke-tpu-accelerator": "tpu-v6e-slice",
		"cloud.google.com/gke-tpu-topology":    "2x2",
	}, pod.NodeSelector); diff != "" {
		t.Errorf("NodeSelector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(corev1.ResourceRequirements{
		Requests: quantities("google.com/tpu", "4"), Limits: quantities("google.com/tpu", "4"),
	}, pod.Containers[0].Resources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	env := envMap(pod.Containers[0].Env)
	for _, k := range []string{"JAX_COORDINATOR_ADDRESS", "JAX_PROCESS_ID", "JAX_NUM_PROCESSES"} {
		if _, ok := env[k]; ok {
			t.Errorf("single-host job sets %s", k)
		}
	}
	if env["FALCON_WORLD_SIZE"].Value != "1" {
		t.Errorf("FALCON_WORLD_SIZE = %q, want 1", env["FALCON_WORLD_SIZE"].Value)
	}
}

func TestRenderGPU(t *testing.T) {
	j := v7xJob()
	j.TaskSpec.DeviceType, j.TaskSpec.DeviceTopo, j.TaskSpec.Replica, j.TaskSpec.DeviceCount = "nvidia-h100-80gb", "", 2, 8
	in := input(j)
	in.NodePool = ""
	objs := render(t, in)

	pod := objs.Jobs[0].Spec.Template.Spec
	if diff := cmp.Diff(map[string]string{"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}, pod.NodeSelector); diff != "" {
		t.Errorf("NodeSelector (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]corev1.Toleration{{Key: "nvidia.com/gpu", Operator: "Exists", Effect: "NoSchedule"}}, pod.Tolerations); diff != "" {
		t.Errorf("Tolerations (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(corev1.ResourceRequirements{
		Requests: quantities("nvidia.com/gpu", "8"), Limits: quantities("nvidia.com/gpu", "8"),
	}, pod.Containers[0].Resources); diff != "" {
		t.Errorf("resources (-want +got):\n%s", diff)
	}
	if objs.Service == nil || pod.Subdomain != jobID {
		t.Errorf("two GPU hosts need the headless Service and subdomain; Service=%v Subdomain=%q", objs.Service, pod.Subdomain)
	}
}

// taskResources builds a task's resources from "requests.cpu", "2", ...
func taskResources(kv ...string) *falconv1.Resources {
	r := &falconv1.Resources{}
	for i := 0; i < len(kv); i += 2 {
		kind, name, _ := strings.Cut(kv[i], ".")
		m := &r.Requests
		if kind == "limits" {
			m = &r.Limits
		}
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[name] = kv[i+1]
	}
	return r
}

func TestRenderCPUResources(t *testing.T) {
	tests := []struct {
		name string
		task *falconv1.Resources // task_spec.resources
		want corev1.ResourceRequirements
	}{
		{"defaults", nil, corev1.ResourceRequirements{
			Requests: quantities("cpu", "1", "memory", "2Gi"),
			Limits:   quantities("memory", "2Gi"),
		}},
		{"the task's resources replace the defaults",
			taskResources("requests.cpu", "2", "requests.memory", "4Gi", "limits.cpu", "4", "limits.memory", "8Gi"),
			corev1.ResourceRequirements{
				Requests: quantities("cpu", "2", "memory", "4Gi"),
				Limits:   quantities("cpu", "4", "memory", "8Gi"),
			}},
		{"the task's limits alone are also its requests",
			taskResources("limits.cpu", "500m", "limits.memory", "1Gi"),
			corev1.ResourceRequirements{
				Requests: quantities("cpu", "500m", "memory", "1Gi"),
				Limits:   quantities("cpu", "500m", "memory", "1Gi"),
			}},
		{"the task's memory request raises the default limit with it",
			taskResources("requests.memory", "16Gi"),
			corev1.ResourceRequirements{
				Requests: quantities("cpu", "1", "memory", "16Gi"),
				Limits:   quantities("memory", "16Gi"),
			}},
		{"the task's ephemeral storage, defaults for the rest",
			taskResources("requests.ephemeral-storage", "10Gi", "limits.ephemeral-storage", "20Gi"),
			corev1.ResourceRequirements{
				Requests: quantities("cpu", "1", "memory", "2Gi", "ephemeral-storage", "10Gi"),
				Limits:   quantities("memory", "2Gi", "ephemeral-storage", "20Gi"),
			}},
		{"empty task resources keep the defaults", &falconv1.Resources{}, corev1.ResourceRequirements{
			Requests: quantities("cpu", "1", "memory", "2Gi"),
			Limits:   quantities("memory", "2Gi"),
		}},
		{"the task's CPU limit alone, the memory defaults",
			taskResources("limits.cpu", "8"),
			corev1.ResourceRequirements{
				Requests: quantities("cpu", "8", "memory", "2Gi"),
				Limits:   quantities("cpu", "8", "memory", "2Gi"),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := v7xJob()
			j.TaskSpec.DeviceType, j.TaskSpec.DeviceTopo, j.TaskSpec.Replica, j.TaskSpec.DeviceCount = "cpu", "", 1, 0
			j.TaskSpec.Resources = tt.task
			in := input(j)
			in.NodePool = ""
			pod := render(t, in).Jobs[0].Spec.Template.Spec
			if diff := cmp.Diff(tt.want, pod.Containers[0].Resources); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
			if pod.NodeSelector != nil || pod.Tolerations != nil {
				t.Errorf("CPU job selects nodes: %v, %v", pod.NodeSelector, pod.Tolerations)
			}
		})
	}
}

func TestRenderResourcesOnAcceleratorJob(t *testing.T) {
	gpu := func(j *falconv1.Job) {
		j.TaskSpec.DeviceType, j.TaskSpec.DeviceTopo, j.TaskSpec.Replica, j.TaskSpec.DeviceCount = "nvidia-h100-80gb", "", 2, 8
	}
	tests := []struct {
		name string
		gpu  bool
		task *falconv1.Resources
		want corev1.ResourceRequirements
	}{
		{name: "the task's, next to the TPUs",
			task: taskResources("requests.cpu", "100", "requests.memory", "400Gi", "limits.memory", "420Gi", "limits.ephemeral-storage", "100Gi"),
			want: corev1.ResourceRequirements{
				Requests: quantities("cpu", "100", "memory", "400Gi", "ephemeral-storage", "100Gi", "google.com/tpu", "4"),
				Limits:   quantities("memory", "420Gi", "ephemeral-storage", "100Gi", "google.com/tpu", "4"),
			}},
		{name: "the task's, next to the GPUs", gpu: true,
			task: taskResources("limits.memory", "64Gi"),
			want: corev1.ResourceRequirements{
				Requests: quantities("memory", "64Gi", "nvidia.com/gpu", "8"),
				Limits:   quantities("memory", "64Gi", "nvidia.com/gpu", "8"),
			}},
		{name: "no defaults on an accelerator host", task: &falconv1.Resources{},
			want: corev1.ResourceRequirements{
				Requests: quantities("google.com/tpu", "4"),
				Limits:   quantities("google.com/tpu", "4"),
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := v7xJob()
			j.TaskSpec.Resources = tt.task
			in := input(j)
			if tt.gpu {
				gpu(j)
				in.NodePool = ""
			}
			got := render(t, in).Jobs[0].Spec.Template.Spec.Containers[0].Resources
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("resources (-want +got):\n%s", diff)
			}
		})
	}
}

// Every resource a task may give (validation.ResourceNames) reaches the
// container: a name added there must not be dropped here silently.
func TestRenderEveryTaskResourceName(t *testing.T) {
	j := v7xJob()
	j.TaskSpec.Resources = &falconv1.Resources{Requests: map[string]string{}, Limits: map[string]string{}}
	for _, name := range validation.ResourceNames {
		j.TaskSpec.Resources.Requests[name] = "1"
		j.TaskSpec.Resources.Limits[name] = "2"
	}
	got := render(t, input(j)).Jobs[0].Spec.Template.Spec.Containers[0].Resources
	for _, name := range validation.ResourceNames {
		req, lim := got.Requests[corev1.ResourceName(name)], got.Limits[corev1.ResourceName(name)]
		if req.String() != "1" || lim.String() != "2" {
			t.Errorf("%s: request %s, limit %s; want 1 and 2", name, &req, &lim)
		}
	}
}

// The pods run as the cluster's service account, which Workload Identity
// lets mount the bucket; without one, as the namespace's default.
func TestRenderServiceAccount(t *testing.T) {
	tests := []struct {
		name string
		sa   string
	}{
		{"the cluster's", "falcon-jobs.tpu"},
		{"none: the namespace's default", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(v7xJob())
			in.ServiceAccount = tt.sa
			pod := render(t, in).Jobs[0].Spec.Template.Spec
			if pod.ServiceAccountName != tt.sa {
				t.Errorf("serviceAccountName = %q, want %q", pod.ServiceAccountName, tt.sa)
			}
			if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
				t.Errorf("automountServiceAccountToken = %v, want false: tasks do not call the Kubernetes API", pod.AutomountServiceAccountToken)
			}
		})
	}
}

func TestRenderWithoutBucket(t *testing.T) {
	j := v7xJob()
	j.ArtifactPath = "/var/lib/falcon/experiments/" + expID + "/artifacts/" + artID + "/" // the server's disk
	in := input(j)
	in.Bucket = ""
	objs := render(t, in)
	tmpl := objs.Jobs[0].Spec.Template

	if tmpl.Annotations != nil {
		t.Errorf("pod annotations = %v, want none (no GCS FUSE)", tmpl.Annotations)
	}
	if diff := cmp.Diff([]corev1.Volume{
		{Name: "falcon-artifacts", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}, tmpl.Spec.Volumes); diff != "" {
		t.Errorf("Volumes (-want +got):\n%s", diff)
	}
	c := tmpl.Spec.Containers[0]
	if diff := cmp.Diff([]corev1.VolumeMount{{Name: "falcon-artifacts", MountPath: "/falcon/artifacts"}}, c.VolumeMounts); diff != "" {
		t.Errorf("VolumeMounts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"python train.py"}, c.Args); diff != "" {
		t.Errorf("Args (-want +got):\n%s", diff)
	}
}

func TestRenderArtifactLocation(t *testing.T) {
	tests := []struct {
		name         string
		bucket       string
		artifactPath string
		want         map[string]string // volumeAttributes of falcon-artifacts; nil = emptyDir
	}{
		{"the job's gs:// path", bucket, "gs://" + bucket + "/experiments/" + expID + "/artifacts/" + artID + "/",
			map[string]string{"bucketName": bucket, "mountOptions": "implicit-dirs,only-dir=experiments/" + expID + "/artifacts/" + artID}},
		{"a gs:// path in another bucket wins", bucket, "gs://shared-artifacts/team-a/" + artID,
			map[string]string{"bucketName": "shared-artifacts", "mountOptions": "implicit-dirs,only-dir=team-a/" + artID}},
		{"a gs:// path without a cluster bucket", "", "gs://shared-artifacts/x/" + artID,
			map[string]string{"bucketName": "shared-artifacts", "mountOptions": "implicit-dirs,only-dir=x/" + artID}},
		{"no path: the conventional prefix in the cluster bucket", bucket, "",
			map[string]string{"bucketName": bucket, "mountOptions": "implicit-dirs,only-dir=experiments/" + expID + "/artifacts/" + artID}},
		{"a server directory is unreachable: the cluster bucket instead", bucket, "/data/experiments/x/",
			map[string]string{"bucketName": bucket, "mountOptions": "implicit-dirs,only-dir=experiments/" + expID + "/artifacts/" + artID}},
		{"nothing to mount", "", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := v7xJob()
			j.ArtifactPath = tt.artifactPath
			in := input(j)
			in.Bucket = tt.bucket
			objs := render(t, in)
			v := objs.Jobs[0].Spec.Template.Spec.Volumes[0]
			if v.Name != "falcon-artifacts" {
				t.Fatalf("first volume is %s", v.Name)
			}
			var got map[string]string
			if v.CSI != nil {
				got = v.CSI.VolumeAttributes
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("artifact volume (-want +got):\n%s", diff)
			}
			fuse := objs.Jobs[0].Spec.Template.Annotations["gke-gcsfuse/volumes"] == "true"
			if fuse != (tt.want != nil || tt.bucket != "") {
				t.Errorf("gke-gcsfuse/volumes annotation = %v with artifact %v and bucket %q", fuse, tt.want, tt.bucket)
			}
		})
	}
}

func TestRenderFalconEnvsWin(t *testing.T) {
	j := v7xJob()
	j.TaskSpec.Envs = map[string]string{
		"FALCON_RANK": "7", "FALCON_JOB_ID": "job-other00000", "JAX_COORDINATOR_ADDRESS": "elsewhere:1", "MINE": "1",
	}
	env := render(t, input(j)).Jobs[0].Spec.Template.Spec.Containers[0].Env
	m := envMap(env)
	if m["FALCON_RANK"].ValueFrom == nil || m["FALCON_JOB_ID"].Value != jobID ||
		m["JAX_COORDINATOR_ADDRESS"].Value != CoordinatorAddress(jobID) || m["MINE"].Value != "1" {
		t.Errorf("env = %v; Falcon's values must win and MINE must stay", env)
	}
}

// expand is the kubelet's $(VAR) expansion of command, args and env values
// (kubernetes/third_party/forked/golang/expansion): $$ is a literal $,
// $(NAME) is NAME's value when NAME is defined, anything else stays as is.
func expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteByte('$')
				continue
			}
			name := s[i+2 : i+2+end]
			if v, ok := vars[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString("$(" + name + ")")
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func TestRenderKeepsDollarsLiteral(t *testing.T) {
	j := v7xJob()
	j.TaskSpec.Command = `tmp=/tmp/run.$$; echo "$(date) rank $(FALCON_RANK) $FALCON_RANK" > $tmp`
	j.TaskSpec.Envs = map[string]string{"PRICE": "$(FALCON_JOB_ID) costs $$5"}
	j.Config = "cost: $$(FALCON_ROLE)"
	objs := render(t, input(j))
	c := objs.Jobs[0].Spec.Template.Spec.Containers[0]

	vars := map[string]string{}
	for _, e := range c.Env {
		vars[e.Name] = expand(e.Value, vars)
	}
	if got := vars["PRICE"]; got != "$(FALCON_JOB_ID) costs $$5" {
		t.Errorf("PRICE reaches the task as %q", got)
	}
	if got := vars["CUSTOM_CONFIG_KEY"]; got != j.Config {
		t.Errorf("CUSTOM_CONFIG_KEY reaches the task as %q", got)
	}
	if got := expand(c.Args[2], vars); got != j.TaskSpec.Command {
		t.Errorf("command reaches the shell as %q", got)
	}
	if got := expand(c.Args[0], vars); got != logWrapper(LogDir, logDrain) {
		t.Errorf("log wrapper reaches the shell as %q", got)
	}
}

func TestRenderErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(in *Input)
		fields []string
	}{
		{"missing image", func(in *Input) { in.Job.TaskSpec.Image = " " }, []string{"image"}},
		{"several slices of GPUs", func(in *Input) {
			in.Job.TaskSpec.DeviceType, in.Job.TaskSpec.DeviceTopo, in.Job.TaskSpec.Replica, in.Job.TaskSpec.Slices = "nvidia-h100-80gb", "", 1, 2
		}, []string{"slices"}},
		{"job ID too long for the last slice's hostname", func(in *Input) {
			in.Job.Id, in.Job.TaskSpec.Slices = "job-"+strings.Repeat("a", 56), 2
		}, []string{"job.id"}},
		{"bad device type", func(in *Input) { in.Job.TaskSpec.DeviceType = "v9z" }, []string{"device_type"}},
		{"replica does not match the topology", func(in *Input) { in.Job.TaskSpec.Replica = 2 }, []string{"replica"}},
		{"device_count in chips", func(in *Input) { in.Job.TaskSpec.DeviceCount = 4 }, []string{"device_count"}},
		{"2D topology on v7x", func(in *Input) { in.Job.TaskSpec.DeviceTopo = "4x4" }, []string{"device_topo"}},
		{"task limit below its request", func(in *Input) {
			in.Job.TaskSpec.Resources = taskResources("requests.memory", "8Gi", "limits.memory", "4Gi")
		}, []string{"resources.limits.memory"}},
		{"task resources cannot override the accelerator", func(in *Input) {
			in.Job.TaskSpec.Resources = taskResources("limits.google.com/tpu", "8")
		}, []string{"resources.limits.google.com/tpu"}},
		{"bad task quantity", func(in *Input) {
			in.Job.TaskSpec.Resources = taskResources("requests.cpu", "two", "limits.cpu", "0")
		}, []string{"resources.requests.cpu", "resources.limits.cpu"}},
		{"no job", func(in *Input) { in.Job = nil }, []string{"job"}},
		{"no task spec", func(in *Input) { in.Job.TaskSpec = nil }, []string{"task_spec"}},
		{"job ID not a DNS label", func(in *Input) { in.Job.Id = "Job_1" }, []string{"job.id"}},
		{"job ID too long for the last hostname", func(in *Input) { in.Job.Id = "job-" + strings.Repeat("a", 58) }, []string{"job.id"}},
		{"no exp ID", func(in *Input) { in.Job.ExpId = "" }, []string{"job.exp_id"}},
		{"no cluster ID", func(in *Input) { in.ClusterID = "" }, []string{"cluster_id"}},
		{"bad namespace", func(in *Input) { in.Namespace = "Falcon" }, []string{"namespace"}},
		{"bucket given as a URL", func(in *Input) { in.Bucket = "gs://falcon-edge-a" }, []string{"bucket"}},
		{"artifact path with a comma", func(in *Input) { in.Job.ArtifactPath = "gs://b-1/a,b" }, []string{"artifact_path"}},
		{"no artifact ID to place the artifact", func(in *Input) {
			in.Job.ArtifactPath, in.Job.ArtifactId = "", ""
		}, []string{"artifact_id"}},
		{"bad service account", func(in *Input) { in.ServiceAccount = "Not_OK" }, []string{"service_account"}},
		{"bad node pool", func(in *Input) { in.NodePool = "pool!" }, []string{"node_pool"}},
		{"empty command", func(in *Input) { in.Job.TaskSpec.Command = "\n" }, []string{"command"}},
		{"command beyond MAX_ARG_STRLEN", func(in *Input) { in.Job.TaskSpec.Command = strings.Repeat("x", 128<<10) }, []string{"command"}},
		{"config beyond MAX_ARG_STRLEN", func(in *Input) { in.Job.Config = strings.Repeat("x", 200<<10) }, []string{"config"}},
		{"bad env name", func(in *Input) { in.Job.TaskSpec.Envs["1BAD"] = "x" }, []string{"envs.1BAD"}},
		{"several problems at once", func(in *Input) {
			in.Job.TaskSpec.Image = ""
			in.Job.TaskSpec.Replica = 2
			in.Job.TaskSpec.Resources = taskResources("requests.memory", "much")
		}, []string{"image", "replica", "resources.requests.memory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := input(v7xJob())
			tt.mutate(&in)
			objs, err := Render(in)
			if err == nil {
				t.Fatalf("Render succeeded: %+v", objs)
			}
			if !errors.Is(err, errdefs.ErrInvalid) {
				t.Errorf("%v is not ErrInvalid", err)
			}
			var fe errdefs.FieldErrors
			if !errors.As(err, &fe) {
				t.Fatalf("%v (%T) is not errdefs.FieldErrors", err, err)
			}
			var got []string
			for _, e := range fe {
				got = append(got, e.Field)
			}
			if diff := cmp.Diff(tt.fields, got); diff != "" {
				t.Errorf("fields (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

// The variables a task may not set (validation) are the ones Falcon sets
// for every rank (here), in the same order.
func TestReservedEnvsMatchValidation(t *testing.T) {
	env := render(t, input(v7xJob())).Jobs[0].Spec.Template.Spec.Containers[0].Env
	var got []string
	for _, e := range env[:len(validation.ReservedEnvs)] {
		got = append(got, e.Name)
	}
	if diff := cmp.Diff(validation.ReservedEnvs, got); diff != "" {
		t.Errorf("first env vars (-validation.ReservedEnvs +rendered):\n%s", diff)
	}
}

func TestNames(t *testing.T) {
	if got := LogObject(jobID, 3); got != "logs/job-abc123xyz0/job-abc123xyz0-3.log" {
		t.Errorf("LogObject = %q", got)
	}
	if got := CoordinatorAddress(jobID); got != "job-abc123xyz0-0.job-abc123xyz0:8476" {
		t.Errorf("CoordinatorAddress = %q", got)
	}
	if got := ArtifactPrefix(expID, artID); got != "experiments/exp-q7odgo8q9x/artifacts/art-1t44htxy4y" {
		t.Errorf("ArtifactPrefix = %q", got)
	}
	if ManagedBySelector != "app.kubernetes.io/managed-by=falcon" {
		t.Errorf("ManagedBySelector = %q", ManagedBySelector)
	}
}

func TestSetOwner(t *testing.T) {
	objs := render(t, input(v7xJob()))
	created := objs.Jobs[0].DeepCopy()
	created.UID = types.UID("0b5a6d2c-1111-4c3e-9f00-000000000001")
	SetOwner(objs.Service, created)
	SetOwner(objs.Service, created) // idempotent
	want := []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: jobID, UID: created.UID}}
	if diff := cmp.Diff(want, objs.Service.OwnerReferences); diff != "" {
		t.Errorf("OwnerReferences (-want +got):\n%s", diff)
	}
	if errs := apimachineryvalidation.ValidateOwnerReferences(objs.Service.OwnerReferences, field.NewPath("metadata", "ownerReferences")); len(errs) > 0 {
		t.Errorf("owner references invalid: %v", errs.ToAggregate())
	}
}

func envMap(env []corev1.EnvVar) map[string]corev1.EnvVar {
	m := map[string]corev1.EnvVar{}
	for _, e := range env {
		m[e.Name] = e
	}
	return m
}

// validateObjects runs the checks of Kubernetes' API validation that are
// cheap to reach from apimachinery, so a rendered object that the API server
// would reject fails here first: object metadata (names, labels,
// annotations), selectors, names of containers, volumes and env vars,
// hostnames of the Indexed pods, and the Service selecting the pods.
func validateObjects(t *testing.T, objs *Objects) {
	t.Helper()
	if len(objs.Jobs) == 0 {
		t.Fatal("no Job rendered")
	}
	for _, job := range objs.Jobs {
		validateJob(t, job, objs.Service)
	}
}

func validateJob(t *testing.T, job *batchv1.Job, svc *corev1.Service) {
	t.Helper()
	var errs field.ErrorList
	errs = append(errs, apimachineryvalidation.ValidateObjectMeta(&job.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("job", "metadata"))...)
	tmpl := job.Spec.Template
	errs = append(errs, metavalidation.ValidateLabels(tmpl.Labels, field.NewPath("template", "labels"))...)
	errs = append(errs, apimachineryvalidation.ValidateAnnotations(tmpl.Annotations, field.NewPath("template", "annotations"))...)
	for k, v := range tmpl.Spec.NodeSelector {
		for _, m := range append(content.IsLabelKey(k), content.IsLabelValue(v)...) {
			errs = append(errs, field.Invalid(field.NewPath("nodeSelector", k), v, m))
		}
	}
	// An Indexed Job's pods are named <job>-<index>-<suffix> and get the
	// hostname <job>-<index>, which must be a DNS label.
	last := Hostname(job.Name, int(*job.Spec.Completions)-1)
	for _, m := range content.IsDNS1123Label(last) {
		errs = append(errs, field.Invalid(field.NewPath("hostname"), last, m))
	}
	if sub := tmpl.Spec.Subdomain; sub != "" {
		for _, m := range content.IsDNS1123Label(sub) {
			errs = append(errs, field.Invalid(field.NewPath("subdomain"), sub, m))
		}
	}
	if *job.Spec.Completions != *job.Spec.Parallelism || *job.Spec.Completions < 1 {
		t.Errorf("completions %d, parallelism %d", *job.Spec.Completions, *job.Spec.Parallelism)
	}
	if tmpl.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("restartPolicy %q; a Job's pods must not restart in place here", tmpl.Spec.RestartPolicy)
	}

	volumes := map[string]bool{}
	for _, v := range tmpl.Spec.Volumes {
		for _, m := range content.IsDNS1123Label(v.Name) {
			errs = append(errs, field.Invalid(field.NewPath("volumes"), v.Name, m))
		}
		if volumes[v.Name] {
			errs = append(errs, field.Duplicate(field.NewPath("volumes"), v.Name))
		}
		volumes[v.Name] = true
	}
	for _, c := range tmpl.Spec.Containers {
		for _, m := range content.IsDNS1123Label(c.Name) {
			errs = append(errs, field.Invalid(field.NewPath("containers", "name"), c.Name, m))
		}
		if c.Image == "" {
			errs = append(errs, field.Required(field.NewPath("containers", "image"), ""))
		}
		seen := map[string]bool{}
		for _, e := range c.Env {
			for _, m := range k8svalidation.IsEnvVarName(e.Name) {
				errs = append(errs, field.Invalid(field.NewPath("env"), e.Name, m))
			}
			if seen[e.Name] {
				errs = append(errs, field.Duplicate(field.NewPath("env"), e.Name))
			}
			seen[e.Name] = true
		}
		for _, vm := range c.VolumeMounts {
			if !volumes[vm.Name] {
				errs = append(errs, field.NotFound(field.NewPath("volumeMounts"), vm.Name))
			}
		}
		for _, list := range []corev1.ResourceList{c.Resources.Requests, c.Resources.Limits} {
			for name := range list {
				for _, m := range content.IsLabelKey(string(name)) {
					errs = append(errs, field.Invalid(field.NewPath("resources"), name, m))
				}
			}
		}
	}

	if svc != nil {
		errs = append(errs, apimachineryvalidation.ValidateObjectMeta(&svc.ObjectMeta, true, apimachineryvalidation.NameIsDNS1035Label, field.NewPath("service", "metadata"))...)
		errs = append(errs, metavalidation.ValidateLabels(svc.Spec.Selector, field.NewPath("service", "selector"))...)
		for k, v := range svc.Spec.Selector {
			if tmpl.Labels[k] != v {
				t.Errorf("Service selects %s=%s, which the pods do not carry", k, v)
			}
		}
		if svc.Name != tmpl.Spec.Subdomain {
			t.Errorf("Service %s is not the pods' subdomain %q", svc.Name, tmpl.Spec.Subdomain)
		}
	}
	if len(errs) > 0 {
		t.Errorf("rendered objects fail API validation:\n%v", errs.ToAggregate())
	}
}
