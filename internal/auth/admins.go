package auth

import "strings"

// Admins are the people who may act on anyone's experiments. They are
// named by email, compared case-insensitively; only a person (not a
// service token or a controller) can be an admin.
type Admins struct {
	emails map[string]bool
}

// NewAdmins returns the admin list of emails; empty entries are ignored.
func NewAdmins(emails ...string) Admins {
	a := Admins{emails: map[string]bool{}}
	for _, e := range emails {
		if e = strings.ToLower(strings.TrimSpace(e)); e != "" {
			a.emails[e] = true
		}
	}
	return a
}

// Has reports whether p is an admin.
func (a Admins) Has(p Principal) bool {
	return p.Kind == KindUser && p.Email != "" && a.emails[strings.ToLower(p.Email)]
}
