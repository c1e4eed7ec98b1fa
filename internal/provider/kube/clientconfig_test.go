package kube

import (
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// The backend's clients run at ClusterQPS unless the connection sets its
// own rate, never at client-go's command-line default, and never share the
// caller's config. They speak protobuf unless the connection names its
// own content type, and they ask for no gzip.
func TestClientConfig(t *testing.T) {
	tests := []struct {
		name      string
		in        rest.Config
		wantQPS   float32
		wantBurst int
		wantType  string
	}{
		{"a kubeconfig's (no rate)", rest.Config{Host: "https://a", Timeout: time.Minute}, ClusterQPS, 2 * ClusterQPS, "application/vnd.kubernetes.protobuf"},
		{"a connection with its own rate", rest.Config{Host: "https://b", QPS: 7, Burst: 9}, 7, 9, "application/vnd.kubernetes.protobuf"},
		{"a connection with its own content type", rest.Config{Host: "https://c", ContentConfig: rest.ContentConfig{ContentType: "application/json"}}, ClusterQPS, 2 * ClusterQPS, "application/json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			got := clientConfig(&in)
			if got.QPS != tt.wantQPS || got.Burst != tt.wantBurst || got.Timeout != 0 {
				t.Errorf("QPS %v burst %d timeout %v; want %v, %d, 0", got.QPS, got.Burst, got.Timeout, tt.wantQPS, tt.wantBurst)
			}
			if !got.DisableCompression {
				t.Error("compression is asked for; want none (watch events are compressed and inflated for nothing)")
			}
			if got.ContentType != tt.wantType {
				t.Errorf("content type %q, want %q", got.ContentType, tt.wantType)
			}
			if in.QPS != tt.in.QPS || in.Timeout != tt.in.Timeout {
				t.Errorf("the caller's config was changed: %+v", in)
			}
		})
	}
}
