package auth_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
)

func TestPeek(t *testing.T) {
	iss := authtest.NewIssuer(t)
	c := iss.UserClaims("a@example.com")
	c["exp"] = 1900000000.5
	h, got, err := auth.Peek(authtest.Sign(iss.Key(), c))
	if err != nil {
		t.Fatal(err)
	}
	if h.Alg != "RS256" || h.Kid != "key-1" {
		t.Errorf("header %+v", h)
	}
	if got.Email != "a@example.com" || got.Issuer != iss.URL || len(got.Audience) != 1 ||
		!got.Expiry.Equal(time.Unix(1900000000, 5e8)) {
		t.Errorf("claims %+v", got)
	}
	for _, bad := range []string{"", "x", "a.b", "a.b.c", "e30.W10.x"} {
		if _, _, err := auth.Peek(bad); err == nil {
			t.Errorf("Peek(%q) succeeded", bad)
		}
	}
}

func TestControllerSecret(t *testing.T) {
	secret := auth.GenerateControllerSecret()
	s, err := auth.NewControllerSecret(secret + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Match(secret) || s.Match(secret+"x") || s.Match("") {
		t.Error("Match is wrong")
	}
	if _, err := auth.NewControllerSecret("short"); err == nil || !strings.Contains(err.Error(), "at least") {
		t.Errorf("NewControllerSecret(short) = %v", err)
	}
	var creds credentials.PerRPCCredentials = auth.ControllerCredentials(secret)
	md, err := creds.GetRequestMetadata(context.Background())
	if err != nil || md[auth.ControllerTokenKey] != secret {
		t.Errorf("credentials metadata %v, %v", md, err)
	}
}

func TestAdmins(t *testing.T) {
	a := auth.NewAdmins("Root@Example.com", " ", "ops@example.com")
	tests := []struct {
		p    auth.Principal
		want bool
	}{
		{auth.Principal{UserID: "1", Email: "root@example.com", Kind: auth.KindUser}, true},
		{auth.Principal{UserID: "2", Email: "OPS@example.com", Kind: auth.KindUser}, true},
		{auth.Principal{UserID: "3", Email: "dev@example.com", Kind: auth.KindUser}, false},
		{auth.Principal{UserID: "service:x", Name: "root@example.com", Kind: auth.KindService}, false},
		{auth.Controller, false},
	}
	for _, tt := range tests {
		if got := a.Has(tt.p); got != tt.want {
			t.Errorf("Has(%+v) = %v, want %v", tt.p, got, tt.want)
		}
	}
}
