// Package logjson writes and reads log lines in their JSON form without
// protojson's reflection: the API server's logs route, the client that reads
// it and `exp logs -o json` handle millions of lines, where protojson cost
// most of the time. The form is exactly protojson's for LogLine (proto field
// names, every field present, Timestamps as RFC 3339 with 0, 3, 6 or 9
// fractional digits), which the tests hold it to.
package logjson
