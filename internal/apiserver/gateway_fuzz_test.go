package apiserver_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/apiserver"
	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/ids"
	"github.com/falconhq/falcon/internal/testenv/apitest"
	"github.com/falconhq/falcon/internal/validation"
)

// bodyRoute is an HTTP route that takes a request body, decoded as its
// generated gateway handler decodes it (falcon.pb.gw.go): body "*" into the
// request itself, body "cluster" into the request's cluster field, which
// takes grpc-gateway's other (reflective) path.
type bodyRoute struct {
	name   string
	decode func(runtime.Decoder) (proto.Message, error)
}

var bodyRoutes = []bodyRoute{
	{"CreateExp", func(d runtime.Decoder) (proto.Message, error) {
		var req falconv1.CreateExpRequest
		return &req, d.Decode(&req)
	}},
	{"AbortExp", func(d runtime.Decoder) (proto.Message, error) {
		var req falconv1.AbortExpRequest
		return &req, d.Decode(&req)
	}},
	{"RegisterCluster", func(d runtime.Decoder) (proto.Message, error) {
		var req falconv1.RegisterClusterRequest
		return &req, d.Decode(&req.Cluster)
	}},
	{"ApplyClusters", func(d runtime.Decoder) (proto.Message, error) {
		var req falconv1.ApplyClustersRequest
		return &req, d.Decode(&req)
	}},
	{"SetClusterStatus", func(d runtime.Decoder) (proto.Message, error) {
		var req falconv1.SetClusterStatusRequest
		return &req, d.Decode(&req)
	}},
}

// decodeBody decodes body as the gateway does: with the server's marshaler
// (apiserver.JSONMarshaler, unknown fields refused), an empty body being an
// empty request, as the generated handlers treat io.EOF.
func decodeBody(r bodyRoute, body []byte) (proto.Message, error) {
	msg, err := r.decode(apiserver.JSONMarshaler().NewDecoder(bytes.NewReader(body)))
	if errors.Is(err, io.EOF) {
		err = nil
	}
	return msg, err
}

// FuzzDecodeRequestBody decodes arbitrary bodies for every HTTP route that
// takes one, in process and so fast. `go test` replays the seed corpus in
// testdata/fuzz/FuzzDecodeRequestBody (the bodies of the API tests and edge
// cases); `make fuzz` explores from it. Beyond not panicking:
//   - a refused body has an error with a message, which the gateway sends
//     back as the InvalidArgument answer;
//   - a body the gateway accepts is one JSON object that protojson, strict,
//     accepts whole and reads as the same request: the gateway reads no more
//     and no less than a gRPC client's JSON would say, so nothing a client
//     sent is silently dropped;
//   - an accepted request written with the server's marshaler (as the CLI
//     and the gateway write JSON) and decoded again is the same request.
func FuzzDecodeRequestBody(f *testing.F) {
	f.Add(uint8(0), []byte(twoRoles))
	f.Fuzz(func(t *testing.T, route uint8, body []byte) {
		r := bodyRoutes[int(route)%len(bodyRoutes)]
		msg, err := decodeBody(r, body)
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatalf("%s: a refused body has an empty error", r.name)
			}
			return
		}
		if len(bytes.TrimSpace(body)) > 0 {
			strict := msg.ProtoReflect().New().Interface()
			target := strict
			if r.name == "RegisterCluster" {
				target = &falconv1.Cluster{}
				strict.(*falconv1.RegisterClusterRequest).Cluster = target.(*falconv1.Cluster)
			}
			if serr := protojson.Unmarshal(body, target); serr != nil {
				t.Fatalf("%s: the gateway accepts a body that is not one valid JSON request (%v):\n%q", r.name, serr, body)
			}
			if diff := cmp.Diff(strict, msg, protocmp.Transform()); diff != "" {
				t.Fatalf("%s: the gateway reads the body otherwise than protojson (-protojson +gateway):\n%s", r.name, diff)
			}
		}
		out, err := apiserver.JSONMarshaler().Marshal(msg)
		if err != nil {
			t.Fatalf("%s: an accepted request cannot be written: %v", r.name, err)
		}
		again := msg.ProtoReflect().New().Interface()
		if err := apiserver.JSONMarshaler().Unmarshal(out, again); err != nil {
			t.Fatalf("%s: the request as written is refused: %v\n%s", r.name, err, out)
		}
		if diff := cmp.Diff(msg, again, protocmp.Transform()); diff != "" {
			t.Fatalf("%s: written and read again, the request changed (-first +second):\n%s", r.name, diff)
		}
	})
}

// FuzzGatewayCreateExp posts arbitrary bodies to POST /v1/experiments of a
// real API server (apitest: the production gateway, gRPC services,
// validation and SQLite store, over loopback), so the whole path of a JSON
// request runs. `go test` replays testdata/fuzz/FuzzGatewayCreateExp.
//
// The answer must follow from the body alone:
//   - a body the gateway's decoder refuses is 400 InvalidArgument with a
//     message;
//   - a request validation refuses is 400 InvalidArgument whose message is
//     exactly validation's, every field named;
//   - a valid request is 200, the experiment created (or, validate_only,
//     described without an ID) with the roles as sent, or 409 when its name
//     is taken;
//   - never anything else: no 5xx for any body a client can send.
func FuzzGatewayCreateExp(f *testing.F) {
	f.Add([]byte(twoRoles))
	a := apitest.Start(f, map[string]string{"local": "local"},
		apiserver.WithLogger(slog.New(slog.DiscardHandler)),
		apiserver.WithAuthenticator(auth.Local{P: auth.Principal{UserID: "local:alice", Email: "alice@localhost"}}))
	url := "http://" + a.HTTPAddr + "/v1/experiments"
	client := &http.Client{}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		var answer struct {
			Code    codes.Code `json:"code"`
			Message string     `json:"message"`
		}
		if resp.StatusCode != http.StatusOK {
			if err := json.Unmarshal(raw, &answer); err != nil || strings.TrimSpace(answer.Message) == "" {
				t.Fatalf("HTTP %d with a body that is not a status with a message (%v): %q\nrequest %q", resp.StatusCode, err, raw, body)
			}
		}
		invalid := func(why string) {
			t.Helper()
			if resp.StatusCode != http.StatusBadRequest || answer.Code != codes.InvalidArgument {
				t.Fatalf("%s, yet the answer is HTTP %d %q\nrequest %q", why, resp.StatusCode, raw, body)
			}
		}

		msg, derr := decodeBody(bodyRoutes[0], body)
		if derr != nil {
			invalid("the body does not decode (" + derr.Error() + ")")
			return
		}
		in := msg.(*falconv1.CreateExpRequest)
		if verr := validation.Experiment(in.GetExperiment(), func(c string) bool { return c == "local" }, []string{"local"}); verr != nil {
			invalid("validation refuses the request")
			if answer.Message != verr.Error() {
				t.Fatalf("the answer does not say what validation says:\ngot  %q\nwant %q", answer.Message, verr.Error())
			}
			return
		}
		switch resp.StatusCode {
		case http.StatusConflict:
			if answer.Code != codes.AlreadyExists {
				t.Fatalf("HTTP 409 with code %v: %q", answer.Code, raw)
			}
		case http.StatusOK:
			var got falconv1.Experiment
			if err := apiserver.JSONMarshaler().Unmarshal(raw, &got); err != nil {
				t.Fatalf("the created experiment does not decode: %v\n%s", err, raw)
			}
			want := in.GetExperiment()
			if got.GetName() != want.GetName() || got.GetConfig() != want.GetConfig() || len(got.GetJobs()) != len(want.GetRoleToTaskSpec()) {
				t.Fatalf("the experiment returned is not the one sent:\nsent %v\ngot  %v", want, &got)
			}
			if diff := cmp.Diff(want.GetRoleToTaskSpec(), got.GetRoleToTaskSpec(), protocmp.Transform()); diff != "" {
				t.Fatalf("the roles returned are not those sent (-sent +returned):\n%s", diff)
			}
			if in.GetValidateOnly() != (got.GetId() == "") || (!in.GetValidateOnly() && !ids.Valid(ids.Experiment, got.GetId())) {
				t.Fatalf("validate_only %v, yet the experiment's id is %q", in.GetValidateOnly(), got.GetId())
			}
		default:
			t.Fatalf("a valid request answered HTTP %d %q\nrequest %q", resp.StatusCode, raw, body)
		}
	})
}
