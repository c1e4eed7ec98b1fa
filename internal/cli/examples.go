package cli

import "github.com/spf13/cobra"

// fallbackExamples are the examples of commands whose own package gives
// none yet (their packages belong to work in progress elsewhere); a
// package's own Example always wins, so these go away by themselves.
var fallbackExamples = map[string]string{
	"falcon": `  falcon exp create -f examples/hello.yaml
  falcon exp list -o wide
  falcon exp get my-run --jq .status`,
	"falcon cluster": `  falcon cluster list
  falcon cluster status v7x-east
  falcon cluster set-status v7x-east maintenance`,
	"falcon cluster get": `  falcon cluster get local
  falcon cluster get v7x-east -o json --jq .accelerator_types`,
	"falcon cluster list": `  falcon cluster list
  falcon cluster list -o name`,
}

// addFallbackExamples fills in fallbackExamples where a command has none.
func addFallbackExamples(cmd *cobra.Command) {
	if ex, ok := fallbackExamples[cmd.CommandPath()]; ok && cmd.Example == "" {
		cmd.Example = ex
	}
	for _, sub := range cmd.Commands() {
		addFallbackExamples(sub)
	}
}
