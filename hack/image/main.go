// Command image is `make image`: it writes Falcon's OCI image archive
// (bin/falcon-image.tar) with internal/ociimage, without a Docker daemon.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/falconhq/falcon/internal/ociimage"
)

func main() {
	var o ociimage.Options
	flag.StringVar(&o.Out, "o", "bin/falcon-image.tar", "the archive to write")
	flag.StringVar(&o.Version, "version", "", "version to stamp and tag (default: git describe --tags --always --dirty)")
	flag.StringVar(&o.Arch, "arch", "", "GOARCH to build for (default amd64)")
	flag.StringVar(&o.CACertsFile, "ca-certs", "", "CA bundle to copy in (default "+ociimage.CABundle+")")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	res, err := ociimage.Make(ctx, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: falcon:%s %s (%.1f MiB compressed, %.1f MiB uncompressed)\n",
		res.Path, res.Version, res.Digest, float64(res.Compressed)/(1<<20), float64(res.Uncompressed)/(1<<20))
}
