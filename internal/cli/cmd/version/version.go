package version

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/falconhq/falcon/internal/cli/factory"
	"github.com/falconhq/falcon/internal/cli/iostreams"
	"github.com/falconhq/falcon/internal/output"
)

// Version is set at build time:
//
//	go build -ldflags "-X github.com/falconhq/falcon/internal/cli/cmd/version.Version=v1.2.3" ./cmd/falcon
//
// Without it the module version from the build info is used.
var Version = ""

// Info describes this build.
type Info struct {
	Version   string
	Commit    string
	GoVersion string
	Platform  string
}

// Current returns the running build's Info.
func Current() Info {
	info := Info{Version: Version, GoVersion: runtime.Version(), Platform: runtime.GOOS + "/" + runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if info.Version == "" {
			info.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" {
				info.Commit = s.Value
			}
		}
	}
	if info.Version == "" || info.Version == "(devel)" {
		info.Version = "dev"
	}
	return info
}

// Options are the inputs of `falcon version`.
type Options struct {
	IO      *iostreams.IOStreams
	Printer func() *output.Printer
	Info    func() Info
}

// NewCmdVersion builds the command. runF replaces versionRun in tests.
func NewCmdVersion(f *factory.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{IO: f.IOStreams, Printer: f.Printer, Info: Current}
	return &cobra.Command{
		Use: "version",
		Example: `  falcon version
  falcon version -o json --jq .version`,
		Short: "Print the CLI's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return versionRun(cmd.Context(), opts)
		},
	}
}

func versionRun(_ context.Context, opts *Options) error {
	info := opts.Info()
	// A Struct prints through the shared printer as a plain JSON object.
	msg, err := structpb.NewStruct(map[string]any{
		"version":    info.Version,
		"commit":     info.Commit,
		"go_version": info.GoVersion,
		"platform":   info.Platform,
	})
	if err != nil {
		return err
	}
	return opts.Printer().Print(msg, func(v output.View) error {
		line := "falcon " + info.Version
		if info.Commit != "" {
			line += " (" + info.Commit + ")"
		}
		_, err := fmt.Fprintf(v.Out, "%s %s %s\n", line, info.GoVersion, info.Platform)
		return err
	})
}
