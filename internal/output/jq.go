package output

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"

	"github.com/itchyny/gojq"

	"github.com/falconhq/falcon/internal/errdefs"
)

// JQFlag is the flag a Query comes from, named in its errors.
const JQFlag = "--jq"

// Query is a compiled --jq expression, applied to each JSON document a
// command prints, as gh does: a string result is printed bare (so `--jq
// .id` gives exp-..., not "exp-..."), anything else as one line of JSON.
type Query struct {
	src  string
	code *gojq.Code
}

// ParseQuery compiles expr. A syntax error is bad input reported against
// --jq, with gojq's description of it.
func ParseQuery(expr string) (*Query, error) {
	q, err := gojq.Parse(expr)
	if err != nil {
		return nil, errdefs.Invalid(JQFlag, "%s: %v", quoteExpr(expr), err)
	}
	// env and $ENV read the environment, as in jq: a script passes a
	// value in (TYPE=v7x falcon ... --jq 'select(.x == env.TYPE)').
	code, err := gojq.Compile(q, gojq.WithEnvironLoader(os.Environ))
	if err != nil {
		return nil, errdefs.Invalid(JQFlag, "%s: %v", quoteExpr(expr), err)
	}
	return &Query{src: expr, code: code}, nil
}

func quoteExpr(expr string) string {
	b, _ := json.Marshal(expr)
	return string(b)
}

// Apply runs the query on one JSON document and writes each result on a
// line of its own. An error the expression raises on this input (`.a.b` on
// a string, `error("...")`) is reported against --jq; `halt` and
// `halt_error` end the output quietly.
func (q *Query) Apply(w io.Writer, doc []byte) error {
	dec := json.NewDecoder(bytes.NewReader(doc))
	// Numbers stay exact (seq, sizes and versions are int64).
	dec.UseNumber()
	var in any
	if err := dec.Decode(&in); err != nil {
		return err
	}
	var buf bytes.Buffer
	iter := q.code.Run(in)
	for {
		v, ok := iter.Next()
		if !ok {
			break
		}
		if err, ok := v.(error); ok {
			var halt *gojq.HaltError
			if errors.As(err, &halt) {
				break
			}
			if _, err := w.Write(buf.Bytes()); err != nil {
				return err
			}
			return errdefs.Invalid(JQFlag, "%s: %v", quoteExpr(q.src), err)
		}
		if s, ok := v.(string); ok {
			buf.WriteString(s)
		} else {
			b, err := gojq.Marshal(v)
			if err != nil {
				return err
			}
			buf.Write(b)
		}
		buf.WriteByte('\n')
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// String is the expression as given.
func (q *Query) String() string { return q.src }
