// Package iostreams gives commands stdin, stdout and stderr together with
// whether each is a terminal, because the CLI behaves differently for people
// and for pipes: tables versus JSON by default, prompting for confirmation
// versus refusing without --yes. Tests swap in buffers and choose which
// streams "are" terminals.
package iostreams
