package auth

import "github.com/falconhq/falcon/internal/errdefs"

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

func refuse(reason string, detail error) error {
	return &RefusedError{Reason: reason, Detail: detail}
}
