package logjson

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// line mirrors LogLine's JSON form for encoding/json, several times faster
// than protojson's reflection over the same bytes.
type line struct {
	JobID  string  `json:"job_id"`
	Role   string  `json:"role"`
	Rank   int32   `json:"rank"`
	Pod    string  `json:"pod"`
	Line   string  `json:"line"`
	Time   *string `json:"time"`
	Resume string  `json:"resume"`
}

type batch struct {
	Lines []line `json:"lines"`
}

// DecodeLines reads the JSON form of a LogLines message (a chunk's result).
func DecodeLines(data []byte) ([]*falconv1.LogLine, error) {
	var b batch
	if err := json.Unmarshal(data, &b); err != nil {
		return nil, err
	}
	out := make([]*falconv1.LogLine, len(b.Lines))
	for i, l := range b.Lines {
		ll := &falconv1.LogLine{JobId: l.JobID, Role: l.Role, Rank: l.Rank, Pod: l.Pod, Line: l.Line, Resume: l.Resume}
		if l.Time != nil {
			t, err := time.Parse(time.RFC3339Nano, *l.Time)
			if err != nil {
				return nil, fmt.Errorf("line %d: time %q: %w", i, *l.Time, err)
			}
			ll.Time = timestamppb.New(t)
		}
		out[i] = ll
	}
	return out, nil
}

// chunkPrefix starts every chunk AppendChunk writes.
const chunkPrefix = `{"result":{"lines":[`

// DecodeChunk reads one chunk of the newline-delimited stream (without its
// newline). ok is false when the chunk is not a batch of lines (an error
// chunk): the caller decodes it as such. Chunks in AppendChunk's own form
// are read by a scanner made for it; anything else by encoding/json.
func DecodeChunk(chunk []byte) (lines []*falconv1.LogLine, ok bool, err error) {
	if len(chunk) >= len(chunkPrefix) && string(chunk[:len(chunkPrefix)]) == chunkPrefix {
		if lines, err := scanChunk(chunk[len(chunkPrefix):]); err == nil {
			return lines, true, nil
		}
	}
	var env struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(chunk, &env); err != nil {
		return nil, false, err
	}
	if len(env.Result) == 0 || string(env.Result) == "null" {
		return nil, false, nil
	}
	lines, err = DecodeLines(env.Result)
	return lines, err == nil, err
}

// scanChunk reads the lines array of a chunk and its closing "]}}".
func scanChunk(b []byte) ([]*falconv1.LogLine, error) {
	var out []*falconv1.LogLine
	i := 0
	for {
		if i < len(b) && b[i] == ']' {
			if string(b[i:]) != "]}}" {
				return nil, errBadChunk
			}
			return out, nil
		}
		if len(out) > 0 {
			if i >= len(b) || b[i] != ',' {
				return nil, errBadChunk
			}
			i++
		}
		l, n, err := scanLine(b[i:])
		if err != nil {
			return nil, err
		}
		out = append(out, l)
		i += n
	}
}

var errBadChunk = fmt.Errorf("logjson: not a chunk in logjson's form")

// scanLine reads one {"job_id": ..., ...} object, in any key order.
func scanLine(b []byte) (*falconv1.LogLine, int, error) {
	if len(b) == 0 || b[0] != '{' {
		return nil, 0, errBadChunk
	}
	l := &falconv1.LogLine{}
	i := 1
	for {
		if i >= len(b) {
			return nil, 0, errBadChunk
		}
		if b[i] == '}' {
			return l, i + 1, nil
		}
		if b[i] == ',' {
			i++
		}
		key, n, err := scanString(b[i:])
		if err != nil || i+n >= len(b) || b[i+n] != ':' {
			return nil, 0, errBadChunk
		}
		i += n + 1
		switch key {
		case "rank":
			j := i
			for j < len(b) && (b[j] == '-' || b[j] >= '0' && b[j] <= '9') {
				j++
			}
			r, err := strconv.ParseInt(string(b[i:j]), 10, 32)
			if err != nil {
				return nil, 0, errBadChunk
			}
			l.Rank, i = int32(r), j
		case "time":
			if len(b[i:]) >= 4 && string(b[i:i+4]) == "null" {
				i += 4
				continue
			}
			s, n, err := scanString(b[i:])
			if err != nil {
				return nil, 0, err
			}
			t, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				return nil, 0, errBadChunk
			}
			l.Time, i = timestamppb.New(t), i+n
		default:
			s, n, err := scanString(b[i:])
			if err != nil {
				return nil, 0, err
			}
			i += n
			switch key {
			case "job_id":
				l.JobId = s
			case "role":
				l.Role = s
			case "pod":
				l.Pod = s
			case "line":
				l.Line = s
			case "resume":
				l.Resume = s
			default:
				return nil, 0, errBadChunk // a field this scanner does not know
			}
		}
	}
}

// scanString reads a JSON string; strings with escapes are unquoted by
// strconv, whose escapes are JSON's but for "\/".
func scanString(b []byte) (string, int, error) {
	if len(b) == 0 || b[0] != '"' {
		return "", 0, errBadChunk
	}
	escaped := false
	for i := 1; i < len(b); i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			if !escaped {
				return string(b[1:i]), i + 1, nil
			}
			s, err := strconv.Unquote(strings.ReplaceAll(string(b[:i+1]), `\/`, `/`))
			if err != nil {
				return "", 0, errBadChunk
			}
			return s, i + 1, nil
		}
	}
	return "", 0, errBadChunk
}
