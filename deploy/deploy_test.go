package deploy_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	sigsyaml "sigs.k8s.io/yaml"

	"github.com/falconhq/falcon/internal/cli"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/testenv/kubeenv"
)

// overlays are what operators deploy; each must render and apply.
var overlays = []string{"overlays/gke", "overlays/dev"}

// operatorSecrets are the Secrets the manifests name but do not contain:
// the operator creates them, with the commands docs/operations.md gives.
var operatorSecrets = []string{"falcon-db", "falcon-tls", "falcon-controller-token", "falcon-google-credentials"}

const (
	namespace = "falcon"
	server    = "falcon-server"
	ctrl      = "falcon-controller"
	// metricsPort serves /metrics, /healthz and /readyz on both.
	metricsPort = 9091
	grpcPort    = 9090
	httpPort    = 8080
)

// cliEnv makes the test binary run `falcon` itself (cli.Main, exactly what
// cmd/falcon/main.go calls), so container arguments are parsed by the real
// command tree.
const cliEnv = "FALCON_DEPLOY_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		os.Exit(cli.Main())
	}
	os.Exit(m.Run())
}

// TestInvariants renders every overlay and checks what a reviewer would.
func TestInvariants(t *testing.T) {
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) { checkInvariants(t, o, index(t, render(t, o))) })
	}
}

// TestServerSideDryRun renders every overlay and applies each object with a
// strict server-side dry-run to a real kube-apiserver, failing on any
// refusal or warning and naming the object.
func TestServerSideDryRun(t *testing.T) {
	c := kubeenv.Start(t)
	api := newApplier(t, c.RESTConfig())
	for _, f := range []string{"testdata/crds/podmonitoring.yaml", "testdata/crds/servicemonitor.yaml"} {
		api.installCRD(t, f)
	}

	begin := time.Now()
	renders := map[string][]*unstructured.Unstructured{}
	for _, o := range overlays {
		renders[o] = render(t, o)
	}
	renderTime := time.Since(begin)

	// Namespaced objects can only be dry-run into a namespace that exists:
	// the rendered Namespace (with its Pod Security labels, which the
	// apiserver then enforces on the dry-run pods) is applied for real,
	// everything else dry-run.
	for _, o := range overlays {
		for _, obj := range renders[o] {
			if obj.GetKind() == "Namespace" {
				if err := api.apply(obj, false); err != nil {
					t.Fatalf("%s: %v", describe(obj), err)
				}
			}
		}
	}
	dryRunStart := time.Now()
	for _, o := range overlays {
		t.Run(o, func(t *testing.T) {
			start := time.Now()
			for _, obj := range renders[o] {
				if err := api.apply(obj, true); err != nil {
					t.Errorf("%s rejected: %v", describe(obj), err)
				}
			}
			t.Logf("%d objects dry-run in %s", len(renders[o]), time.Since(start).Round(time.Millisecond))
		})
	}
	dryRun := time.Since(dryRunStart)
	t.Logf("kustomize build + server-side dry-run of %d overlays: %s (build %s, dry-run %s); the apiserver started in %s",
		len(overlays), (renderTime + dryRun).Round(time.Millisecond), renderTime.Round(time.Millisecond),
		dryRun.Round(time.Millisecond), c.StartupTime().Round(time.Millisecond))
}

func render(t *testing.T, dir string) []*unstructured.Unstructured {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range m.Resources() {
		obj, err := r.Map()
		if err != nil {
			t.Fatalf("%s: %v", dir, err)
		}
		out = append(out, &unstructured.Unstructured{Object: obj})
	}
	return out
}

// objects are one overlay's render, typed where the checks need it.
type objects struct {
	all          []*unstructured.Unstructured
	deployments  map[string]*appsv1.Deployment
	services     map[string]*corev1.Service
	accounts     map[string]*corev1.ServiceAccount
	configMaps   map[string]*corev1.ConfigMap
	secrets      map[string]bool
	netpols      map[string]*networkingv1.NetworkPolicy
	pdbs         map[string]*policyv1.PodDisruptionBudget
	roles        map[string]*rbacv1.Role
	roleBindings map[string]*rbacv1.RoleBinding
}

func index(t *testing.T, all []*unstructured.Unstructured) *objects {
	t.Helper()
	o := &objects{all: all, deployments: map[string]*appsv1.Deployment{}, services: map[string]*corev1.Service{},
		accounts: map[string]*corev1.ServiceAccount{}, configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]bool{},
		netpols: map[string]*networkingv1.NetworkPolicy{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		roles: map[string]*rbacv1.Role{}, roleBindings: map[string]*rbacv1.RoleBinding{}}
	for _, u := range all {
		if ns := u.GetNamespace(); u.GetKind() != "Namespace" && ns != namespace {
			t.Errorf("%s is in namespace %q, want %q", describe(u), ns, namespace)
		}
		var err error
		switch u.GetKind() {
		case "Deployment":
			err = into(u, o.deployments)
		case "Service":
			err = into(u, o.services)
		case "ServiceAccount":
			err = into(u, o.accounts)
		case "ConfigMap":
			err = into(u, o.configMaps)
		case "Secret":
			o.secrets[u.GetName()] = true
		case "NetworkPolicy":
			err = into(u, o.netpols)
		case "PodDisruptionBudget":
			err = into(u, o.pdbs)
		case "Role":
			err = into(u, o.roles)
		case "RoleBinding":
			err = into(u, o.roleBindings)
		}
		if err != nil {
			t.Fatalf("%s: %v", describe(u), err)
		}
	}
	return o
}

func into[T any, PT interface {
	*T
	metav1.Object
}](u *unstructured.Unstructured, m map[string]PT) error {
	var v T
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, &v, true); err != nil {
		return err
	}
	p := PT(&v)
	m[p.GetName()] = p
	return nil
}

func describe(u *unstructured.Unstructured) string {
	return fmt.Sprintf("%s %s/%s", u.GetKind(), u.GetNamespace(), u.GetName())
}

func checkInvariants(t *testing.T, overlay string, o *objects) {
	srv, ctl := o.deployments[server], o.deployments[ctrl]
	if srv == nil || ctl == nil {
		t.Fatalf("deployments %v, want %s and %s", keys(o.deployments), server, ctrl)
	}
	checks := []struct {
		name  string
		check func(t *testing.T)
	}{
		{"two replicas each", func(t *testing.T) {
			for _, d := range []*appsv1.Deployment{srv, ctl} {
				if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
					t.Errorf("%s: replicas %v, want 2", d.Name, d.Spec.Replicas)
				}
			}
		}},
		{"probes on the metrics port's /readyz and /healthz", func(t *testing.T) {
			for _, d := range []*appsv1.Deployment{srv, ctl} {
				c := d.Spec.Template.Spec.Containers[0]
				if p := portNamed(c, "metrics"); p != metricsPort {
					t.Errorf("%s: port metrics is %d, want %d", d.Name, p, metricsPort)
				}
				checkProbe(t, d.Name+" readiness", c, c.ReadinessProbe, "/readyz")
				checkProbe(t, d.Name+" liveness", c, c.LivenessProbe, "/healthz")
				if !slices.Contains(c.Args, fmt.Sprintf("--metrics-addr=:%d", metricsPort)) {
					t.Errorf("%s: args %v do not serve the metrics port", d.Name, c.Args)
				}
			}
		}},
		{"non-root, read-only, no capabilities", func(t *testing.T) {
			for _, d := range []*appsv1.Deployment{srv, ctl} {
				ps := d.Spec.Template.Spec.SecurityContext
				if ps == nil || ps.RunAsNonRoot == nil || !*ps.RunAsNonRoot || ps.RunAsUser == nil || *ps.RunAsUser != 65532 {
					t.Errorf("%s: pod securityContext %+v, want runAsNonRoot as 65532", d.Name, ps)
				}
				if ps == nil || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("%s: no RuntimeDefault seccomp profile", d.Name)
				}
				for _, c := range allContainers(d) {
					sc := c.SecurityContext
					if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
						sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
						sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
						t.Errorf("%s/%s: securityContext %+v, want a read-only root, no privilege escalation, all capabilities dropped", d.Name, c.Name, sc)
					}
					if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
						t.Errorf("%s/%s: resources %+v, want cpu and memory requests and a memory limit", d.Name, c.Name, c.Resources)
					}
				}
			}
		}},
		{"images replaced by the overlay, one per deployment", func(t *testing.T) {
			for _, d := range []*appsv1.Deployment{srv, ctl} {
				var images []string
				for _, c := range allContainers(d) {
					images = append(images, c.Image)
					if c.Image == server || c.Image == ctrl || !strings.Contains(c.Image, ":") {
						t.Errorf("%s/%s: image %q is the base's placeholder or has no tag", d.Name, c.Name, c.Image)
					}
				}
				for _, im := range images[1:] {
					if im != images[0] {
						t.Errorf("%s: containers run different images %v", d.Name, images)
					}
				}
			}
		}},
		{"the migration runs before the server", func(t *testing.T) {
			ic := srv.Spec.Template.Spec.InitContainers
			if len(ic) != 1 || len(ic[0].Args) == 0 || ic[0].Args[0] != "migrate" {
				t.Fatalf("init containers %v, want one running migrate", ic)
			}
			if !slices.Contains(srv.Spec.Template.Spec.Containers[0].Args, "--migrate=false") {
				t.Errorf("the server migrates too: %v", srv.Spec.Template.Spec.Containers[0].Args)
			}
			if u := srv.Spec.Strategy.RollingUpdate; u == nil || u.MaxUnavailable == nil || u.MaxUnavailable.IntValue() != 0 {
				t.Errorf("rolling update %+v: an old pod must serve until a migrated new one is ready", u)
			}
		}},
		{"service exposes http and grpc", func(t *testing.T) {
			s := o.services[server]
			if s == nil {
				t.Fatalf("no Service %s", server)
			}
			if !labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(srv.Spec.Template.Labels)) {
				t.Errorf("Service %s selects %v, not the server's pods", server, s.Spec.Selector)
			}
			got := map[int32]int{}
			for _, p := range s.Spec.Ports {
				got[p.Port] = resolvePort(srv.Spec.Template.Spec.Containers[0], p.TargetPort)
			}
			if want := map[int32]int{httpPort: httpPort, grpcPort: grpcPort}; !mapsEqual(want, got) {
				t.Errorf("Service %s ports %v, want %v", server, got, want)
			}
		}},
		{"disruption budgets keep one of each", func(t *testing.T) {
			for _, d := range []*appsv1.Deployment{srv, ctl} {
				p := o.pdbs[d.Name]
				if p == nil || p.Spec.MinAvailable == nil || p.Spec.MinAvailable.IntValue() != 1 {
					t.Errorf("%s: PodDisruptionBudget %+v, want minAvailable 1", d.Name, p)
					continue
				}
				if !selects(t, p.Spec.Selector, d.Spec.Template.Labels) {
					t.Errorf("PodDisruptionBudget %s does not select its pods", p.Name)
				}
			}
		}},
		{"the controller's RBAC is its Lease", func(t *testing.T) {
			checkLeaseRBAC(t, o, ctl)
		}},
		{"only controllers reach gRPC", func(t *testing.T) {
			checkNetworkPolicy(t, o, srv, ctl)
		}},
		{"every Secret and ConfigMap exists or is the operator's", func(t *testing.T) {
			checkReferences(t, o, srv, ctl)
		}},
		{"arguments parse as falcon's flags", func(t *testing.T) {
			for _, d := range []*appsv1.Deployment{srv, ctl} {
				for _, c := range allContainers(d) {
					checkArgs(t, o, d.Name+"/"+c.Name, c)
				}
			}
		}},
		{"the clusters file parses", func(t *testing.T) {
			cm := o.configMaps["falcon-clusters"]
			if cm == nil {
				t.Fatal("no ConfigMap falcon-clusters")
			}
			clusters, err := clusterconfig.Parse([]byte(cm.Data["clusters.yaml"]))
			if err != nil || len(clusters) == 0 {
				t.Errorf("clusters.yaml: %d clusters, %v", len(clusters), err)
			}
		}},
		{"metrics are scraped", func(t *testing.T) {
			checkScraped(t, o, srv, ctl)
		}},
	}
	if overlay == "overlays/gke" {
		checks = append(checks, struct {
			name  string
			check func(t *testing.T)
		}{"Workload Identity", func(t *testing.T) {
			for _, want := range []struct{ ksa, gsa string }{{ctrl, "cluster-controller"}, {server, "falcon-server"}} {
				sa := o.accounts[want.ksa]
				if sa == nil {
					t.Errorf("no ServiceAccount %s", want.ksa)
					continue
				}
				// PROJECT_ID is the placeholder an operator replaces.
				re := regexp.MustCompile(`^` + want.gsa + `@(PROJECT_ID|[a-z][-a-z0-9]{4,28}[a-z0-9])\.iam\.gserviceaccount\.com$`)
				if got := sa.Annotations["iam.gke.io/gcp-service-account"]; !re.MatchString(got) {
					t.Errorf("ServiceAccount %s: iam.gke.io/gcp-service-account = %q, want %s@PROJECT.iam.gserviceaccount.com", want.ksa, got, want.gsa)
				}
			}
			if srv.Spec.Template.Spec.ServiceAccountName != server || ctl.Spec.Template.Spec.ServiceAccountName != ctrl {
				t.Errorf("pods run as %q and %q", srv.Spec.Template.Spec.ServiceAccountName, ctl.Spec.Template.Spec.ServiceAccountName)
			}
		}})
	}
	for _, c := range checks {
		t.Run(c.name, c.check)
	}
}

func allContainers(d *appsv1.Deployment) []corev1.Container {
	return append(slices.Clone(d.Spec.Template.Spec.InitContainers), d.Spec.Template.Spec.Containers...)
}

func portNamed(c corev1.Container, name string) int {
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort)
		}
	}
	return 0
}

// resolvePort turns a named or numbered port into the container's number.
func resolvePort(c corev1.Container, p intstr.IntOrString) int {
	if p.Type == intstr.String {
		return portNamed(c, p.StrVal)
	}
	return p.IntValue()
}

func checkProbe(t *testing.T, what string, c corev1.Container, p *corev1.Probe, path string) {
	t.Helper()
	if p == nil || p.HTTPGet == nil {
		t.Errorf("%s: no HTTP probe", what)
		return
	}
	if p.HTTPGet.Path != path || resolvePort(c, p.HTTPGet.Port) != metricsPort {
		t.Errorf("%s: GET %s on port %s, want GET %s on %d", what, p.HTTPGet.Path, p.HTTPGet.Port.String(), path, metricsPort)
	}
}

func selects(t *testing.T, sel *metav1.LabelSelector, podLabels map[string]string) bool {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		t.Errorf("selector %v: %v", sel, err)
		return false
	}
	return !s.Empty() && s.Matches(labels.Set(podLabels))
}

func checkLeaseRBAC(t *testing.T, o *objects, ctl *appsv1.Deployment) {
	if len(o.roles) != 1 || len(o.roleBindings) != 1 {
		t.Fatalf("roles %v, bindings %v: want one of each, for the Lease", keys(o.roles), keys(o.roleBindings))
	}
	for _, r := range o.roles {
		for _, rule := range r.Rules {
			if !slices.Equal(rule.APIGroups, []string{"coordination.k8s.io"}) || !slices.Equal(rule.Resources, []string{"leases"}) {
				t.Errorf("Role %s grants %v on %v: more than Leases", r.Name, rule.Verbs, rule.Resources)
			}
			for _, v := range rule.Verbs {
				if !slices.Contains([]string{"get", "create", "update"}, v) {
					t.Errorf("Role %s grants %q on leases", r.Name, v)
				}
			}
		}
	}
	for _, b := range o.roleBindings {
		want := []rbacv1.Subject{{Kind: "ServiceAccount", Name: ctrl, Namespace: namespace}}
		if o.roles[b.RoleRef.Name] == nil || !slices.Equal(b.Subjects, want) {
			t.Errorf("RoleBinding %s binds %v to %s, want the controller's service account", b.Name, b.Subjects, b.RoleRef.Name)
		}
	}
	if ctl.Spec.Template.Spec.ServiceAccountName != ctrl {
		t.Errorf("the controller runs as %q", ctl.Spec.Template.Spec.ServiceAccountName)
	}
	env := map[string]string{}
	for _, e := range ctl.Spec.Template.Spec.Containers[0].Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			env[e.Name] = e.ValueFrom.FieldRef.FieldPath
		}
	}
	if env["POD_NAME"] != "metadata.name" || env["POD_NAMESPACE"] != "metadata.namespace" {
		t.Errorf("the controller's downward API env %v lacks POD_NAME and POD_NAMESPACE", env)
	}
}

// checkNetworkPolicy: a policy isolates the server's pods; every rule that
// admits the gRPC port admits controller pods only; some rule admits the
// HTTP port from anywhere.
func checkNetworkPolicy(t *testing.T, o *objects, srv, ctl *appsv1.Deployment) {
	c := srv.Spec.Template.Spec.Containers[0]
	var isolating []*networkingv1.NetworkPolicy
	for _, np := range o.netpols {
		if selects(t, &np.Spec.PodSelector, srv.Spec.Template.Labels) && slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress) {
			isolating = append(isolating, np)
		}
	}
	if len(isolating) == 0 {
		t.Fatal("no NetworkPolicy isolates the server's pods")
	}
	httpOpen := false
	for _, np := range isolating {
		for i, rule := range np.Spec.Ingress {
			admits := func(port int) bool {
				if len(rule.Ports) == 0 {
					return true
				}
				for _, p := range rule.Ports {
					if p.Port == nil || resolvePort(c, *p.Port) == port {
						return true
					}
				}
				return false
			}
			if admits(grpcPort) {
				if len(rule.From) == 0 {
					t.Errorf("NetworkPolicy %s rule %d admits gRPC from anywhere", np.Name, i)
				}
				for _, peer := range rule.From {
					if peer.IPBlock != nil || peer.NamespaceSelector != nil || peer.PodSelector == nil ||
						!selects(t, peer.PodSelector, ctl.Spec.Template.Labels) || selects(t, peer.PodSelector, srv.Spec.Template.Labels) {
						t.Errorf("NetworkPolicy %s rule %d admits gRPC from %+v, not only controller pods", np.Name, i, peer)
					}
				}
			}
			if admits(httpPort) && len(rule.From) == 0 {
				httpOpen = true
			}
		}
	}
	if !httpOpen {
		t.Error("no NetworkPolicy rule admits the HTTP gateway from whatever fronts it")
	}
}

// checkReferences: every Secret and ConfigMap a pod names is rendered, or
// is one of operatorSecrets and docs/operations.md says how to create it.
func checkReferences(t *testing.T, o *objects, ds ...*appsv1.Deployment) {
	doc, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	secret := func(where, name string) {
		if o.secrets[name] {
			return
		}
		if !slices.Contains(operatorSecrets, name) {
			t.Errorf("%s names Secret %q, which is neither rendered nor one the operator creates", where, name)
			return
		}
		if !regexp.MustCompile(`kubectl .*create secret [a-z]+ ` + name + `\b`).Match(doc) {
			t.Errorf("%s names Secret %q; docs/operations.md does not say how to create it", where, name)
		}
	}
	configMap := func(where, name string) {
		if o.configMaps[name] == nil {
			t.Errorf("%s names ConfigMap %q, which is not rendered", where, name)
		}
	}
	for _, d := range ds {
		spec := d.Spec.Template.Spec
		for _, v := range spec.Volumes {
			where := d.Name + " volume " + v.Name
			switch {
			case v.Secret != nil:
				secret(where, v.Secret.SecretName)
			case v.ConfigMap != nil:
				configMap(where, v.ConfigMap.Name)
			case v.Projected != nil:
				for _, s := range v.Projected.Sources {
					if s.Secret != nil {
						secret(where, s.Secret.Name)
					}
					if s.ConfigMap != nil {
						configMap(where, s.ConfigMap.Name)
					}
				}
			}
		}
		for _, c := range allContainers(d) {
			where := d.Name + "/" + c.Name
			for _, e := range c.EnvFrom {
				if e.SecretRef != nil {
					secret(where, e.SecretRef.Name)
				}
				if e.ConfigMapRef != nil {
					configMap(where, e.ConfigMapRef.Name)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
					secret(where+" env "+e.Name, e.ValueFrom.SecretKeyRef.Name)
				}
				if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
					configMap(where+" env "+e.Name, e.ValueFrom.ConfigMapKeyRef.Name)
				}
			}
		}
	}
}

// checkArgs runs the container's arguments through `falcon`'s own command
// tree with --help appended: cobra parses every flag (names, values) and
// then prints help instead of running, so exit 0 means every flag is one
// the binary has. $(VAR) references are expanded from the container's
// environment the way the kubelet does.
func checkArgs(t *testing.T, o *objects, where string, c corev1.Container) {
	t.Helper()
	if len(c.Command) != 0 {
		t.Errorf("%s: command %v overrides the image's entrypoint", where, c.Command)
	}
	if len(c.Args) == 0 {
		t.Errorf("%s: no args", where)
		return
	}
	env := containerEnv(o, c)
	args := []string{c.Args[0]}
	for _, a := range c.Args[1:] {
		// One element per flag, --name=value: a flag whose value went
		// missing cannot swallow the next one, and nothing is positional.
		if !strings.HasPrefix(a, "--") {
			t.Errorf("%s: argument %q is not a --flag=value", where, a)
		}
		args = append(args, expand(t, where, a, env))
	}
	cmd := exec.Command(os.Args[0], append(args, "--help")...)
	cmd.Env = append(os.Environ(), cliEnv+"=1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		t.Errorf("%s: falcon %s: %v\n%s", where, strings.Join(args, " "), err, stderr.String())
	}
}

// containerEnv is what the kubelet would put in the container's
// environment from literal values and rendered ConfigMaps.
func containerEnv(o *objects, c corev1.Container) map[string]string {
	env := map[string]string{}
	for _, e := range c.EnvFrom {
		if e.ConfigMapRef != nil && o.configMaps[e.ConfigMapRef.Name] != nil {
			for k, v := range o.configMaps[e.ConfigMapRef.Name].Data {
				env[e.Prefix+k] = v
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	return env
}

var varRef = regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func expand(t *testing.T, where, arg string, env map[string]string) string {
	return varRef.ReplaceAllStringFunc(arg, func(ref string) string {
		name := varRef.FindStringSubmatch(ref)[1]
		v, ok := env[name]
		if !ok {
			t.Errorf("%s: %s refers to $(%s), which the container's environment lacks", where, arg, name)
		}
		return v
	})
}

// checkScraped: a PodMonitoring selects both Deployments' pods, or a
// ServiceMonitor selects a Service that does, on the port named metrics.
func checkScraped(t *testing.T, o *objects, ds ...*appsv1.Deployment) {
	scraped := map[string]bool{}
	for _, u := range o.all {
		var spec struct {
			Selector  metav1.LabelSelector `json:"selector"`
			Endpoints []struct {
				Port intstr.IntOrString `json:"port"`
				Path string             `json:"path"`
			} `json:"endpoints"`
		}
		if u.GetKind() != "PodMonitoring" && u.GetKind() != "ServiceMonitor" {
			continue
		}
		b, _ := json.Marshal(u.Object["spec"])
		if err := json.Unmarshal(b, &spec); err != nil {
			t.Fatalf("%s: %v", describe(u), err)
		}
		if len(spec.Endpoints) != 1 || spec.Endpoints[0].Port.String() != "metrics" || spec.Endpoints[0].Path != "/metrics" {
			t.Errorf("%s: endpoints %+v, want port metrics, path /metrics", describe(u), spec.Endpoints)
		}
		for _, d := range ds {
			switch u.GetKind() {
			case "PodMonitoring":
				if selects(t, &spec.Selector, d.Spec.Template.Labels) {
					scraped[d.Name] = true
				}
			case "ServiceMonitor":
				for _, s := range o.services {
					if selects(t, &spec.Selector, s.Labels) && portNamed(d.Spec.Template.Spec.Containers[0], "metrics") != 0 &&
						labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) && hasPort(s, "metrics") {
						scraped[d.Name] = true
					}
				}
			}
		}
	}
	for _, d := range ds {
		if !scraped[d.Name] {
			t.Errorf("nothing scrapes %s's metrics", d.Name)
		}
	}
}

func hasPort(s *corev1.Service, name string) bool {
	for _, p := range s.Spec.Ports {
		if p.Name == name {
			return true
		}
	}
	return false
}

// applier applies objects with server-side apply through the dynamic
// client, collecting the apiserver's warnings per call.
type applier struct {
	dyn    dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper

	mu       sync.Mutex
	warnings []string
}

func newApplier(t *testing.T, cfg *rest.Config) *applier {
	a := &applier{}
	cfg.WarningHandler = a
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	a.dyn, a.mapper = dyn, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	return a
}

// HandleWarningHeader implements rest.WarningHandler.
func (a *applier) HandleWarningHeader(_ int, _ string, text string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.warnings = append(a.warnings, text)
}

func (a *applier) takeWarnings() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	w := a.warnings
	a.warnings = nil
	return w
}

// apply server-side applies obj, dry-run or for real, with strict field
// validation: an unknown or duplicated field is an error, not a warning.
// A warning (a Pod Security violation, a deprecated field) fails it too.
func (a *applier) apply(obj *unstructured.Unstructured, dryRun bool) error {
	gvk := obj.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("no resource for %s: %w", gvk, err)
	}
	var r dynamic.ResourceInterface = a.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		r = a.dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
	}
	data, err := json.Marshal(obj.Object)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "falcon-deploy-test", Force: ptr(true), FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	a.takeWarnings()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := r.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts); err != nil {
		return err
	}
	if w := a.takeWarnings(); len(w) > 0 {
		return fmt.Errorf("accepted with warnings: %s", strings.Join(w, "; "))
	}
	return nil
}

// installCRD applies a CustomResourceDefinition for real and waits until
// discovery serves its kind.
func (a *applier) installCRD(t *testing.T, file string) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := sigsyaml.Unmarshal(b, &u.Object); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if err := a.apply(u, false); err != nil {
		t.Fatalf("%s: %v", filepath.Base(file), err)
	}
	group, _, _ := unstructured.NestedString(u.Object, "spec", "group")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "names", "kind")
	err = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		a.mapper.Reset()
		_, err := a.mapper.RESTMapping(schema.GroupKind{Group: group, Kind: kind})
		if err != nil && !meta.IsNoMatchError(err) && !apierrors.IsNotFound(err) {
			return false, err
		}
		return err == nil, nil
	})
	if err != nil {
		t.Fatalf("CRD %s.%s not served: %v", kind, group, err)
	}
}

func ptr[T any](v T) *T { return &v }

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

func mapsEqual[K comparable, V comparable](a, b map[K]V) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}
