package clusterconfig_test

import (
	"errors"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/clusterconfig"
	"github.com/falconhq/falcon/internal/errdefs"
)

// fuzzHome stands for ~ so that the fuzzer never depends on the machine's
// home directory.
const fuzzHome = "/home/fuzz"

// FuzzParse feeds arbitrary bytes to Parse and ParseOne. `go test` replays
// the seed corpus in testdata/fuzz/FuzzParse (examples/clusters.yaml, the
// table tests' files and edge cases); `make fuzz` explores from it.
//
// Beyond not panicking, it holds the parser to what `falcon cluster apply`
// and the registry rely on:
//   - a refusal is an errdefs.FieldErrors of InvalidArgument that refuses
//     the whole file, every entry naming a field and its line;
//   - the same file gives the same answer, errors in the same order;
//   - accepted clusters are in the stored form: sorted by unique name, and
//     Normalize, which the API server runs on every registration, accepts
//     each unchanged, so a file applied and a cluster registered over the
//     API can never disagree;
//   - the clusters written back out as a file parse to the same clusters;
//   - ParseOne agrees with Parse.
func FuzzParse(f *testing.F) {
	f.Add([]byte("clusters:\n  local:\n    provider: local\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		home := clusterconfig.WithHomeDir(fuzzHome)
		cs, err := clusterconfig.Parse(data, home)
		one, oneErr := clusterconfig.ParseOne(data, home)
		if err != nil {
			if cs != nil {
				t.Fatalf("Parse returned %d clusters and the error %v", len(cs), err)
			}
			checkFieldErrors(t, err)
			if _, again := clusterconfig.Parse(data, home); again == nil || again.Error() != err.Error() {
				t.Fatalf("Parse is not deterministic:\nfirst  %v\nsecond %v", err, again)
			}
			if oneErr == nil || oneErr.Error() != err.Error() {
				t.Fatalf("ParseOne says %v where Parse refused the file: %v", oneErr, err)
			}
			return
		}
		if len(cs) == 0 {
			t.Fatal("Parse accepted a file with no cluster")
		}
		for i, c := range cs {
			if i > 0 && cs[i-1].GetName() >= c.GetName() {
				t.Fatalf("clusters not sorted by unique name: %q then %q", cs[i-1].GetName(), c.GetName())
			}
			n, errs := clusterconfig.Normalize(c)
			if errs != nil {
				t.Fatalf("cluster %q from the file is refused by Normalize: %v", c.GetName(), errs)
			}
			if diff := cmp.Diff(c, n, protocmp.Transform()); diff != "" {
				t.Fatalf("cluster %q is not in the stored form: Normalize changed it (-parsed +normalized):\n%s", c.GetName(), diff)
			}
		}
		written := toFile(t, cs)
		again, err := clusterconfig.Parse(written, home)
		if err != nil {
			t.Fatalf("the accepted clusters, written back out, are refused: %v\nwritten:\n%s", err, written)
		}
		if diff := cmp.Diff(cs, again, protocmp.Transform()); diff != "" {
			t.Fatalf("written back out and parsed again, the clusters changed (-first +second):\n%s\nwritten:\n%s", diff, written)
		}
		switch {
		case len(cs) == 1 && oneErr != nil:
			t.Fatalf("ParseOne refused a file of one cluster: %v", oneErr)
		case len(cs) == 1 && !cmp.Equal(cs[0], one, protocmp.Transform()):
			t.Fatalf("ParseOne and Parse disagree: %v vs %v", one, cs[0])
		case len(cs) > 1:
			checkFieldErrors(t, oneErr)
		}
	})
}

var lineSuffix = regexp.MustCompile(`\(line ([0-9]+)\)$`)

// checkFieldErrors holds err to the registry's contract: errdefs.FieldErrors
// of InvalidArgument, each naming a field and saying what is wrong, on a
// line of at least 1, except the errors about the file as a whole (file,
// clusters) that no single line holds.
func checkFieldErrors(t *testing.T, err error) {
	t.Helper()
	var fes errdefs.FieldErrors
	if !errors.As(err, &fes) || len(fes) == 0 {
		t.Fatalf("error %v (%T) is not a non-empty errdefs.FieldErrors", err, err)
	}
	if c := errdefs.Code(err); c != codes.InvalidArgument {
		t.Fatalf("error %v maps to %v, want InvalidArgument", err, c)
	}
	for _, fe := range fes {
		if fe == nil || strings.TrimSpace(fe.Field) == "" || strings.TrimSpace(fe.Detail) == "" {
			t.Fatalf("field error %#v does not name a field and say what is wrong (in %v)", fe, err)
		}
		if fe.Field == "file" || fe.Field == "clusters" {
			continue
		}
		m := lineSuffix.FindStringSubmatch(fe.Detail)
		if m == nil {
			t.Fatalf("field error %q does not end with its line", fe)
		}
		if n, _ := strconv.Atoi(m[1]); n < 1 {
			t.Fatalf("field error %q points at line %d", fe, n)
		}
	}
}

// toFile writes clusters in the stored form as a clusters file. Every string
// is double-quoted, the one YAML style that can spell any string exactly, so
// a difference after parsing again is the parser's and never this writer's
// choice of style.
func toFile(t *testing.T, cs []*falconv1.Cluster) []byte {
	t.Helper()
	clusters := mapping()
	for _, c := range cs {
		slots := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, s := range c.GetAccelerators() {
			slots.Content = append(slots.Content, mapping("type", str(s.GetType()), "device_class", str(s.GetDeviceClass()), "priority", integer(s.GetPriority())))
		}
		extra := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		for _, a := range c.GetExtraArgs() {
			extra.Content = append(extra.Content, str(a))
		}
		labels := mapping()
		for _, k := range slices.Sorted(maps.Keys(c.GetLabels())) {
			labels.Content = append(labels.Content, str(k), str(c.GetLabels()[k]))
		}
		clusters.Content = append(clusters.Content, str(c.GetName()), mapping(
			"provider", str(c.GetBackend()),
			"project", str(c.GetProject()),
			"location", str(c.GetLocation()),
			"cluster_id", str(c.GetGkeCluster()),
			"kubeconfig", str(c.GetKubeconfig()),
			"context", str(c.GetKubeContext()),
			"accelerator_types", slots,
			"default_namespace", str(c.GetNamespace()),
			"service_account", str(c.GetServiceAccount()),
			"gcs_bucket", str(c.GetGcsBucket()),
			"default_reservation", str(c.GetDefaultReservation()),
			"max_queue_depth", integer(c.GetMaxQueueDepth()),
			"probe_timeout_s", integer(c.GetProbeTimeoutS()),
			"xpk_path", str(c.GetXpkPath()),
			"extra_args", extra,
			"labels", labels,
			"status", str(c.GetStatus()),
		))
	}
	out, err := yaml.Marshal(mapping("clusters", clusters))
	if err != nil {
		t.Fatalf("writing the file: %v", err)
	}
	return out
}

func str(s string) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s, Style: yaml.DoubleQuotedStyle}
}

func integer(v int32) *yaml.Node {
	return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!int", Value: strconv.Itoa(int(v))}
}

func mapping(kv ...any) *yaml.Node {
	n := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for i := 0; i+1 < len(kv); i += 2 {
		n.Content = append(n.Content, str(kv[i].(string)), kv[i+1].(*yaml.Node))
	}
	return n
}
