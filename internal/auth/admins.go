package auth

import "strings"

// Admins are the people who may act on anyone's experiments, write the
// cluster registry and read the audit log. They are named by email or by
// identity-provider group ("group:<name>"), compared case-insensitively;
// only a person (not a service token or a controller) can be an admin.
type Admins struct {
	emails map[string]bool
	groups map[string]bool
}

// GroupPrefix marks an admin entry that names a group rather than an email.
const GroupPrefix = "group:"

// NewAdmins returns the admin list: emails, and groups written as
// "group:<name>"; empty entries are ignored.
func NewAdmins(entries ...string) Admins {
	a := Admins{emails: map[string]bool{}, groups: map[string]bool{}}
	for _, e := range entries {
		e = strings.ToLower(strings.TrimSpace(e))
		switch {
		case e == "" || e == GroupPrefix:
		case strings.HasPrefix(e, GroupPrefix):
			a.groups[strings.TrimPrefix(e, GroupPrefix)] = true
		default:
			a.emails[e] = true
		}
	}
	return a
}

// Has reports whether p is an admin: by email, or by one of its groups.
func (a Admins) Has(p Principal) bool {
	if p.Kind != KindUser {
		return false
	}
	if p.Email != "" && a.emails[strings.ToLower(p.Email)] {
		return true
	}
	for _, g := range p.Groups {
		if a.groups[strings.ToLower(g)] {
			return true
		}
	}
	return false
}

// HasGroups reports whether any admin is named by group: membership shows
// only in a user's token, so the users table cannot say who they are.
func (a Admins) HasGroups() bool { return len(a.groups) > 0 }
