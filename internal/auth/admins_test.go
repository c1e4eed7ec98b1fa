package auth

import (
	"encoding/base64"
	"testing"
)

func TestAdminsByEmailAndGroup(t *testing.T) {
	a := NewAdmins("Boss@Example.com", "group:Falcon-Admins", " ", "group:")
	tests := []struct {
		name string
		p    Principal
		want bool
	}{
		{"admin by email, any case", Principal{Kind: KindUser, Email: "boss@example.com"}, true},
		{"admin by group, any case", Principal{Kind: KindUser, Email: "x@example.com", Groups: []string{"eng", "falcon-admins"}}, true},
		{"other user", Principal{Kind: KindUser, Email: "x@example.com", Groups: []string{"eng"}}, false},
		{"service token in an admin group", Principal{Kind: KindService, Name: "ci", Groups: []string{"falcon-admins"}}, false},
		{"controller", Principal{Kind: KindController}, false},
		{"empty email", Principal{Kind: KindUser}, false},
	}
	for _, tt := range tests {
		if got := a.Has(tt.p); got != tt.want {
			t.Errorf("%s: Has = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestPeekReadsGroups(t *testing.T) {
	enc := func(v string) string { return base64.RawURLEncoding.EncodeToString([]byte(v)) }
	tok := enc(`{"alg":"RS256"}`) + "." + enc(`{"sub":"u","email":"a@b.c","groups":["g1"],"custom":{"groups":["g2"]}}`) + ".sig"
	_, c, err := Peek(tok)
	if err != nil || len(c.Groups) != 2 || c.Groups[0] != "g1" || c.Groups[1] != "g2" {
		t.Fatalf("Peek groups = %v, %v", c.Groups, err)
	}
}
