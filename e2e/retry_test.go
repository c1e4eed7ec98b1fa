package e2e

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A cluster whose admission webhook is down answers every Job create with
// an internal error: a failure that may pass, which Falcon retries at the
// pace the operator set (--dispatch-retry-*), the job's Message naming the
// error and the wait, and gives up on after the window, failing the job
// with the webhook's words. Once the webhook is gone, jobs run there again.
func TestDispatchRetriesFollowTheFlags(t *testing.T) {
	c := edge(t)
	ctx := context.Background()
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	url := "https://127.0.0.1:1/validate" // nothing listens there
	hook := &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "broken-policy"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "jobs.policy.example.com",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: &url},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"batch"}, APIVersions: []string{"v1"}, Resources: []string{"jobs"}}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	hooks := c.Clientset().AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := hooks.Create(ctx, hook, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	d := startDevEnv(t, "", nil, "--dispatch-retry-initial", "200ms", "--dispatch-retry-max", "400ms", "--dispatch-retry-window", "4s")
	applyClusters(t, d, c)

	message := func(e map[string]any) string { m, _ := jobsOf(e)[0]["message"].(string); return m }
	id := d.create(tpuManifest("webhook-down", "2x2x1", 1, nil, ""))["id"].(string)
	exp := d.waitFor(id, "retrying at the flags' pace", func(e map[string]any) bool {
		return strings.Contains(message(e), "retrying in 400ms, for up to 4s")
	})
	if m := message(exp); !strings.Contains(m, "failed calling webhook") {
		t.Errorf("the retry's message %q does not name the webhook's error", m)
	}
	exp = d.waitFor(id, "Failed", func(e map[string]any) bool { return e["status"] == "Failed" })
	j := jobsOf(exp)[0]
	if j["reason"] != "JobSubmitFailed" || !strings.Contains(message(exp), "failed for 4s (") || !strings.Contains(message(exp), "failed calling webhook") {
		t.Fatalf("job ended %v/%v %q; want JobSubmitFailed, failed for 4s, naming the webhook", j["status"], j["reason"], message(exp))
	}

	if err := hooks.Delete(ctx, hook.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	id = d.create(tpuManifest("webhook-gone", "2x2x1", 1, map[string]string{"FALCON_TEST_DURATION": "1s"}, ""))["id"].(string)
	if exp := d.waitFor(id, "Succeeded", func(e map[string]any) bool { return e["status"] == "Succeeded" || e["status"] == "Failed" }); exp["status"] != "Succeeded" {
		t.Fatalf("with the webhook gone: %v %q", exp["status"], message(exp))
	}
}
