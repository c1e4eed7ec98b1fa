// Command falcon is Falcon's CLI and server binary; everything it does is in
// package cli, so it can be tested without building this.
package main

import (
	"os"

	"github.com/falconhq/falcon/internal/cli"
)

func main() { os.Exit(cli.Main()) }
