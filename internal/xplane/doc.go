// Package xplane reads XProf profiles (XSpace files, `<host>.xplane.pb`)
// with memory bounded by their metadata rather than by their events.
//
// A profile of a few minutes is hundreds of MiB to several GiB, almost all
// of it XEvents; unmarshalling it into the generated types of
// api/xplane/v1 would take several times its size in Go structs. Reader
// instead decodes the protobuf wire format itself (with
// google.golang.org/protobuf/encoding/protowire) through one 1 MiB buffer
// over an io.ReaderAt, and hands a Visitor one plane's metadata at a time
// and then one event at a time. What it keeps is a plane's event and stat
// metadata (names, and stats other than bytes values), its line headers,
// the event being decoded, and up to 100 of the XSpace's hostnames,
// errors and warnings; string values longer than MaxString are counted,
// not kept.
//
// XProf writes a plane's metadata after its lines, so Walk reads each
// plane in three steps over its bytes: its id and name; its stats,
// metadata and line headers (jumping over each event by its length); then
// the events of the lines the visitor asks for, in the order it asks.
// That needs random access: Open takes a path (and decompresses a gzip
// file to an unnamed temporary file first); RangeReaderAt reads an object
// in a bucket through ranged streams, opening a new one only when a read
// jumps back or far ahead, so a profile is analysed where it is stored.
//
// Everything Walk decodes is checked against the format: wire types of
// known fields, lengths within their parent message, varints, UTF-8
// strings. By default it also decodes what the visitor does not want, so
// a corrupt byte anywhere in the file is found; WalkOptions.Skip trades
// that for speed. A file that fails is a *CorruptError (errdefs.ErrInvalid)
// naming the file and the byte offset. Protobuf has no checksum, so a
// flipped byte that still decodes (inside a number, say) cannot be told
// from data, and a file cut exactly between two planes reads as a shorter
// XSpace.
package xplane
