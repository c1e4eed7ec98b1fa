package factory

import (
	"github.com/spf13/pflag"

	"github.com/falconhq/falcon/internal/errdefs"
)

// AddPageFlags adds the flags every list command pages with: --limit/-L
// (0: the server's default page size) and --page-token (a previous page's
// next_page_token). noun names what is listed, for the help text.
func AddPageFlags(fl *pflag.FlagSet, limit *int32, token *string, noun string) {
	fl.Int32VarP(limit, "limit", "L", 0, "Maximum number of "+noun+" (0: the server's default page size)")
	fl.StringVar(token, "page-token", "", "Continue from a previous page's next_page_token")
	SetsField(fl, "limit", "page_size")
}

// CheckLimit refuses a negative --limit, naming the flag.
func CheckLimit(limit int32) error {
	if limit < 0 {
		return errdefs.Invalid("--limit", "must not be negative, got %d", limit)
	}
	return nil
}
