package logjson

import (
	"strconv"
	"time"
	"unicode/utf8"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// AppendChunk appends protojson's form of {"result": msg} and a newline:
// one element of grpc-gateway's newline-delimited stream.
func AppendChunk(b []byte, msg *falconv1.LogLines) []byte {
	b = append(b, `{"result":{"lines":[`...)
	for i, l := range msg.GetLines() {
		if i > 0 {
			b = append(b, ',')
		}
		b = AppendLine(b, l)
	}
	return append(b, "]}}\n"...)
}

// AppendLine appends protojson's form of l.
func AppendLine(b []byte, l *falconv1.LogLine) []byte {
	{
		b = append(b, `{"job_id":`...)
		b = appendJSONString(b, l.GetJobId())
		b = append(b, `,"role":`...)
		b = appendJSONString(b, l.GetRole())
		b = append(b, `,"rank":`...)
		b = strconv.AppendInt(b, int64(l.GetRank()), 10)
		b = append(b, `,"pod":`...)
		b = appendJSONString(b, l.GetPod())
		b = append(b, `,"line":`...)
		b = appendJSONString(b, l.GetLine())
		b = append(b, `,"time":`...)
		if t := l.GetTime(); t != nil {
			b = append(b, '"')
			b = AppendTime(b, t.AsTime())
			b = append(b, '"')
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"resume":`...)
		b = appendJSONString(b, l.GetResume())
		b = append(b, '}')
	}
	return b
}

// AppendTime writes t as protojson writes a Timestamp: UTC, with 0,
// 3, 6 or 9 fractional digits.
func AppendTime(b []byte, t time.Time) []byte {
	t = t.UTC()
	b = t.AppendFormat(b, "2006-01-02T15:04:05")
	if ns := t.Nanosecond(); ns != 0 {
		digits := 9
		switch {
		case ns%1e6 == 0:
			digits, ns = 3, ns/1e6
		case ns%1e3 == 0:
			digits, ns = 6, ns/1e3
		}
		frac := strconv.Itoa(ns)
		b = append(b, '.')
		for range digits - len(frac) {
			b = append(b, '0')
		}
		b = append(b, frac...)
	}
	return append(b, 'Z')
}

const hexDigits = "0123456789abcdef"

// appendJSONString quotes s for JSON. Lines are valid UTF-8 (the server
// makes them so before they become protobuf strings).
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == '\u2028' || r == '\u2029' {
				b = append(b, s[start:i]...)
				b = append(b, `\u202`...)
				b = append(b, hexDigits[r&0xf])
				i += size
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
