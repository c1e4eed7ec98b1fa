package auth_test

import (
	"errors"
	"testing"
	"time"

	"github.com/falconhq/falcon/internal/auth"
	"github.com/falconhq/falcon/internal/auth/authtest"
)

func TestRefusedClass(t *testing.T) {
	tests := []struct{ reason, want string }{
		{"malformed token", "malformed token"},
		{"token expired at 2026-03-04T05:06:07Z", "token expired at"},
		{"token not valid before 2026-03-04T05:06:07Z", "token not valid before"},
		{`token signed with "none"; only RS256 is accepted`, `token signed with "..."; only RS256 is accepted`},
		{`token signed with "a \" b"; only RS256 is accepted`, `token signed with "..."; only RS256 is accepted`},
		{`unterminated "quote`, `unterminated "..."`},
	}
	for _, tt := range tests {
		if got := (&auth.RefusedError{Reason: tt.reason}).Class(); got != tt.want {
			t.Errorf("Class(%q) = %q, want %q", tt.reason, got, tt.want)
		}
	}
}

// Tokens that differ only in values their sender chose are refused in one
// class: a sender cannot make each refusal count apart.
func TestRefusedClassIgnoresTheSendersValues(t *testing.T) {
	iss := authtest.NewIssuer(t)
	v := newVerifier(t, iss)
	class := func(claims map[string]any, alg string) string {
		t.Helper()
		tok := authtest.Sign(iss.Key(), claims)
		if alg != "" {
			tok = authtest.SignWith(map[string]any{"alg": alg, "typ": "JWT"}, claims, func([]byte) []byte { return nil })
		}
		_, _, err := v.Verify(ctx, tok)
		var re *auth.RefusedError
		if !errors.As(err, &re) {
			t.Fatalf("Verify = %v, want a refusal", err)
		}
		return re.Class()
	}
	claims := func(k string, v any) map[string]any {
		c := iss.UserClaims("mallory@example.com")
		c[k] = v
		return c
	}
	now := iss.Now()
	for _, pair := range [][2]string{
		{class(claims("exp", now.Add(-time.Hour).Unix()), ""), class(claims("exp", now.Add(-50*time.Hour).Unix()), "")},
		{class(claims("nbf", now.Add(time.Hour).Unix()), ""), class(claims("nbf", now.Add(9*time.Hour).Unix()), "")},
		{class(iss.UserClaims("mallory@example.com"), "none"), class(iss.UserClaims("mallory@example.com"), "anything-at-all")},
	} {
		if pair[0] != pair[1] {
			t.Errorf("classes %q and %q differ", pair[0], pair[1])
		}
	}
}
