package factory

import (
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// FieldAnnotation is the flag annotation naming the API request fields a
// flag sets, for flags whose name is not the field's (--limit sets
// page_size, --cluster sets cluster_name).
const FieldAnnotation = "falcon/api-field"

// SetsField records that flag fills the request field field (or several),
// so the server's errors about the field name the flag instead.
func SetsField(fl *pflag.FlagSet, flag string, fields ...string) {
	if err := fl.SetAnnotation(flag, FieldAnnotation, fields); err != nil {
		panic("factory.SetsField: " + err.Error()) // a typo in a command's own flag name
	}
}

// NameFlags rewrites a server's field errors ("page_size: must be between 0
// and 1000, got 5000", several joined by "; ") to name the flags the user
// typed ("--limit: ..."). A flag sets the field of its own name with dashes
// as underscores (--page-token: page_token) and those its FieldAnnotation
// lists. Parts about fields no flag sets are left as they are.
func NameFlags(cmd *cobra.Command, msg string) string {
	fields := map[string]string{}
	add := func(f *pflag.Flag) {
		if _, taken := fields[strings.ReplaceAll(f.Name, "-", "_")]; !taken {
			fields[strings.ReplaceAll(f.Name, "-", "_")] = "--" + f.Name
		}
		for _, field := range f.Annotations[FieldAnnotation] {
			fields[field] = "--" + f.Name
		}
	}
	cmd.LocalFlags().VisitAll(add)
	parts := strings.Split(msg, "; ")
	for i, part := range parts {
		field, rest, ok := strings.Cut(part, ": ")
		if !ok {
			continue
		}
		if flag, ok := fields[field]; ok && cmd.Flags().Changed(strings.TrimPrefix(flag, "--")) {
			parts[i] = flag + ": " + rest
		}
	}
	return strings.Join(parts, "; ")
}
