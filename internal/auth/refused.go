package auth

import (
	"strings"

	"github.com/falconhq/falcon/internal/errdefs"
)

// RefusedError is a credential that was not accepted. Reason is short and
// goes back to the caller; Detail says more for the server's log. Neither
// ever contains the credential itself.
type RefusedError struct {
	Reason string
	Detail error
}

func (e *RefusedError) Error() string { return e.Reason }

// Unwrap makes every refusal an errdefs.ErrUnauthenticated.
func (e *RefusedError) Unwrap() error { return errdefs.ErrUnauthenticated }

// Class is Reason without the values the token carried: quoted strings
// become "..." and words that begin with a digit (times) are left out. Such
// values are the caller's to choose, unverified, so refusals are counted
// by class ("token expired at", not every expiry anyone can write).
func (e *RefusedError) Class() string {
	var b strings.Builder
	quoted := false
	for i := 0; i < len(e.Reason); i++ {
		c := e.Reason[i]
		switch {
		case quoted && c == '\\':
			i++ // the escaped character stays inside the quotes
		case c == '"':
			if !quoted {
				b.WriteString(`"..."`)
			}
			quoted = !quoted
		case !quoted:
			b.WriteByte(c)
		}
	}
	words := strings.Fields(b.String())
	kept := words[:0]
	for _, w := range words {
		if w[0] < '0' || w[0] > '9' {
			kept = append(kept, w)
		}
	}
	return strings.Join(kept, " ")
}

func refuse(reason string, detail error) error {
	return &RefusedError{Reason: reason, Detail: detail}
}
