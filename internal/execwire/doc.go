// Package execwire writes and reads, without copying their bytes, the
// messages of an exec session's WebSocket that carry nothing but bytes:
// ExecRequest.stdin one way, ExecResponse.stdout and .stderr the other.
// Each is one field of protobuf's wire form (a tag, a length, the bytes),
// so its header can be written before bytes that go straight from the
// caller's buffer to the socket's, and read before bytes that go straight
// from the socket's buffer to where they are wanted. Every other message
// is marshalled and unmarshalled by the protobuf runtime as usual, and
// the bytes on the wire are the same either way. Exec output and cp move
// hundreds of megabytes through these messages; the copies and garbage of
// proto.Marshal and proto.Unmarshal were a measurable share of their cost.
package execwire
