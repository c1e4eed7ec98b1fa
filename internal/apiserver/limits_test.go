package apiserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/testenv/apitest"
	"github.com/falconhq/falcon/internal/validation"
)

// A config over validation.MaxConfigBytes is bad input, refused by name
// (config) however far over it is, up to the request limit: never
// ResourceExhausted (HTTP 429, which tells clients to retry) from the
// transport. A body beyond the request limit is refused by the gateway,
// naming that limit. Nothing is written either way.
func TestOversizedInputIsInvalidArgument(t *testing.T) {
	env := apitest.Start(t, map[string]string{"local": "local"})
	exp := func(configBytes int) *falconv1.Experiment {
		return &falconv1.Experiment{Name: "big", Config: strings.Repeat("x", configBytes),
			RoleToTaskSpec: map[string]*falconv1.TaskSpec{"main": {Command: "x", Replica: 1}}}
	}
	httpPost := func(t *testing.T, body io.Reader) (int, string) {
		t.Helper()
		resp, err := http.Post("http://"+env.HTTPAddr+"/v1/experiments", "application/json", body)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		raw, _ := io.ReadAll(resp.Body)
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("HTTP %d, non-JSON body %.200q", resp.StatusCode, raw)
		}
		if codes.Code(out.Code) != codes.InvalidArgument && resp.StatusCode == http.StatusBadRequest {
			t.Errorf("HTTP 400 with code %v", codes.Code(out.Code))
		}
		return resp.StatusCode, out.Message
	}

	for _, size := range []int{validation.MaxConfigBytes + 1, 9 << 20, 15 << 20} {
		t.Run(fmt.Sprintf("config of %d bytes", size), func(t *testing.T) {
			_, err := env.Exps.CreateExp(context.Background(), &falconv1.CreateExpRequest{Experiment: exp(size)})
			if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.HasPrefix(st.Message(), "config: ") {
				t.Errorf("gRPC: %.300v; want InvalidArgument naming config", err)
			}
			if size > 9<<20 {
				return // its JSON body would pass the gateway's limit; covered below
			}
			body, err := json.Marshal(map[string]any{"experiment": map[string]any{
				"name": "big", "config": strings.Repeat("x", size), "role_to_task_spec": map[string]any{"main": map[string]any{"command": "x", "replica": 1}}}})
			if err != nil {
				t.Fatal(err)
			}
			if code, msg := httpPost(t, strings.NewReader(string(body))); code != http.StatusBadRequest || !strings.HasPrefix(msg, "config: ") {
				t.Errorf("HTTP: %d %.300q; want 400 naming config", code, msg)
			}
		})
	}

	t.Run("HTTP body over the request limit", func(t *testing.T) {
		pad := strings.Repeat("x", apiserver.MaxRequestBytes)
		body := io.MultiReader(strings.NewReader(`{"experiment": {"name": "big", "config": "`), strings.NewReader(pad), strings.NewReader(`"}}`))
		code, msg := httpPost(t, body)
		if code != http.StatusBadRequest || !strings.Contains(msg, "request body: is larger than the limit of 16777216 bytes (16 MiB)") {
			t.Errorf("HTTP: %d %.300q; want 400 naming the request body limit", code, msg)
		}
	})

	resp, err := env.Exps.ListExps(context.Background(), &falconv1.ListExpsRequest{})
	if err != nil || len(resp.GetItems()) != 0 {
		t.Errorf("experiments after refused creates: %d, %v; want none", len(resp.GetItems()), err)
	}
}
