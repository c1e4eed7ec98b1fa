package cli

// notADocument are the commands that print no document of their own, and
// why. --jq refuses them (there is nothing to filter). Every other client
// command must appear in TestEveryCommandSpeaksEveryFormat, so a new
// command cannot ship without -o json and -o yaml.
var notADocument = map[string]string{
	"falcon auth login":   "interactive: opens a browser; covered by the login flow tests",
	"falcon auth logout":  "prints only a note on stderr",
	"falcon auth token":   "prints the bare token whatever -o says, so $(falcon auth token) works in scripts",
	"falcon dev":          "runs Falcon in the foreground",
	"falcon server":       "runs Falcon in the foreground",
	"falcon controller":   "runs Falcon in the foreground",
	"falcon migrate":      "needs a database flag; its -o json is checked by the MariaDB end-to-end test",
	"falcon artifact cat": "writes the file's bytes as they are, whatever -o says, so it can be piped",
	"falcon exp exec":     "relays the remote command's stdout, stderr and exit code as they are, whatever -o says; covered by e2e TestDevExecAndCp and TestKubernetesExecAndCp",
	"falcon exp cp":       "copies files and prints nothing on stdout; covered by e2e TestDevExecAndCp and TestKubernetesExecAndCp",
	"falcon sim gen":      "writes a trace, one JSON line per job, whatever -o says, for falcon sim --trace; covered by internal/sim's generator tests",
	"falcon report cat":   "writes the report file (report.md or report.json) as the analysis stored it; covered end to end in e2e TestAnalyzeAccuracy",
}
