package runmetrics

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// scanObject reads one metrics.jsonl line, a JSON object, and appends a
// point (step not yet set) for each numeric field that names a metric.
// json.Valid vets the syntax first; scanning the valid text by hand then
// costs no allocation per line, where json.Unmarshal into a map would cost
// several per field. ok is false if the line is to be skipped.
func (e *Extractor) scanObject(dst []Point, line []byte) (step int64, hasStep bool, _ []Point, ok bool) {
	if line[0] != '{' || !json.Valid(line) {
		return 0, false, dst, false
	}
	start := len(dst)
	i := 1
	for {
		i = skipSpace(line, i)
		if line[i] == '}' {
			return step, hasStep, dst, true
		}
		if line[i] == ',' {
			i = skipSpace(line, i+1)
		}
		// A key.
		kEnd := skipString(line, i)
		key := line[i+1 : kEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			var s string
			if json.Unmarshal(line[i:kEnd], &s) != nil {
				return 0, false, dst, false
			}
			key = []byte(s)
		}
		i = skipSpace(line, kEnd)
		i = skipSpace(line, i+1) // the colon
		// Its value.
		vEnd := skipValue(line, i)
		num := line[i:vEnd]
		i = vEnd
		isStep := string(key) == StepField
		if c := num[0]; c != '-' && (c < '0' || c > '9') {
			if isStep {
				return 0, false, dst, false // "step": "10" or null
			}
			continue // not a number: ignored
		}
		if isStep {
			s, good := parseStep(num)
			if !good {
				return 0, false, dst, false
			}
			step, hasStep = s, true
			continue
		}
		v, good := parseValue(num)
		if !good {
			return 0, false, dst, false // out of float64's range: ±Inf
		}
		name := e.fileName(key)
		if name == "" {
			continue
		}
		// A repeated key: the last one wins, as with encoding/json.
		dup := false
		for j := start; j < len(dst); j++ {
			if dst[j].Name == name {
				dst[j].Value, dup = v, true
				break
			}
		}
		if !dup {
			dst = append(dst, Point{Name: name, Value: v, Source: SourceFile})
		}
	}
}

// parseStep accepts a non-negative integer that fits an int64, written
// plainly (10) or as a float with no fraction (10.0, 1e3), since some
// writers emit every number as a float.
func parseStep(num []byte) (int64, bool) {
	if s, err := strconv.ParseInt(string(num), 10, 64); err == nil {
		return s, s >= 0
	}
	f, err := strconv.ParseFloat(string(num), 64)
	if err != nil || f < 0 || f != math.Trunc(f) || f >= 1<<63 {
		return 0, false
	}
	return int64(f), true
}

// The helpers below assume valid JSON (json.Valid said so) and return the
// index just past what they skip.

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

func skipString(b []byte, i int) int {
	for i++; b[i] != '"'; i++ {
		if b[i] == '\\' {
			i++
		}
	}
	return i + 1
}

func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for ; ; i++ {
			switch b[i] {
			case '"':
				i = skipString(b, i) - 1
			case '{', '[':
				depth++
			case '}', ']':
				if depth--; depth == 0 {
					return i + 1
				}
			}
		}
	}
	// A number, true, false or null: up to the next delimiter.
	for i < len(b) {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return i
		}
		i++
	}
	return i
}
