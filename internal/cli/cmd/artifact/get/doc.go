// Package get implements `falcon artifact get`: download an experiment's
// files into a directory, in parallel, verifying each file's checksum,
// skipping files already there and resuming interrupted downloads.
//
// A download goes to <file>.falcon-part next to its destination and is
// renamed into place only once its checksum matches, so DIR never holds a
// file that is half written or wrong under its real name. A part file left
// by an interrupted run is continued from its size (an HTTP range), and
// its bytes are hashed along with the rest before the rename.
package get
