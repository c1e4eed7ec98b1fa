// Package cp implements `falcon exp cp`: files and directories between this
// machine and one rank of a running experiment, both ways, through the
// exec channel of `exp exec` (so through the API server, never a cluster).
//
// A directory travels as one tar stream (tar xf - / tar cf - on the far
// side, Go's archive/tar here) and a file as its bytes (cat, tail -c +N).
// Both are checked with POSIX cksum, which every image's coreutils or
// busybox has: the far side's files are listed with their CRCs after an
// upload, and before a download. A stream that drops is resumed: a file
// from the byte it reached, a directory by sending again only the files
// that did not arrive whole. Nothing is capped. The far side needs
// /bin/sh, cat, tail, mkdir, mv and cksum, and tar for directories; an
// image without them is told so by name.
package cp
