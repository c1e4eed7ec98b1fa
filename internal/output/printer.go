package output

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"sigs.k8s.io/yaml"
)

// marshalOptions match the API server's gateway, so -o json prints exactly
// what the HTTP API returns: snake_case names, zero values included (scripts
// can read .reason without checking that it exists).
var marshalOptions = protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true}

// View is what a TableFunc writes to.
type View struct {
	// Out receives the rendering itself (stdout).
	Out io.Writer
	// Notes receives hints for people that must stay out of pipes (stderr).
	Notes io.Writer
	// Now is the reference time for ages such as "5m".
	Now time.Time
	// Markdown asks for tables in Markdown (-o md).
	Markdown bool
	// Wide asks for the columns a narrow table leaves out (-o wide).
	Wide bool
	// Color: statuses may be coloured (a terminal, or --color=always).
	Color bool
}

// TableFunc renders the human (table) form of a message.
type TableFunc func(v View) error

// Printer prints API messages in the user's chosen format.
type Printer struct {
	Out    io.Writer
	Notes  io.Writer
	Format Format
	// Now defaults to time.Now; tests fix it so ages are stable.
	Now func() time.Time
	// JQ, when set, filters every JSON document printed (--jq).
	JQ *Query
	// Color lets table views colour statuses.
	Color bool
}

// New returns a Printer. A nil now means time.Now.
func New(out, notes io.Writer, format Format, now func() time.Time) *Printer {
	if now == nil {
		now = time.Now
	}
	if notes == nil {
		notes = io.Discard
	}
	return &Printer{Out: out, Notes: notes, Format: format, Now: now}
}

// Print writes msg as JSON or YAML, or calls table for the table format.
// Lists are printed as their List...Response message, so JSON output is
// {"items": [...], "next_page_token": "..."}.
func (p *Printer) Print(msg proto.Message, table TableFunc) error {
	switch p.Format {
	case JSON:
		b, err := MarshalJSON(msg)
		if err != nil {
			return err
		}
		return p.WriteJSON(p.Out, b)
	case YAML:
		b, err := MarshalYAML(msg)
		if err != nil {
			return err
		}
		_, err = p.Out.Write(b)
		return err
	case Name:
		return WriteNames(p.Out, msg)
	default:
		return table(p.view())
	}
}

// WriteJSON writes one JSON document a command prints to w, through --jq
// when one was given. Commands that stream documents (events, logs, get
// -w) call it for each.
func (p *Printer) WriteJSON(w io.Writer, doc []byte) error {
	if p.JQ != nil {
		return p.JQ.Apply(w, doc)
	}
	_, err := w.Write(doc)
	return err
}

// PrintItem prints one element of a stream (log lines): JSON as one compact
// object per line (NDJSON, so `jq` and line-based tools can consume it while
// it is still streaming), YAML as one document each, and text through the
// caller's function.
func (p *Printer) PrintItem(msg proto.Message, text TableFunc) error {
	switch p.Format {
	case JSON:
		b, err := MarshalCompactJSON(msg)
		if err != nil {
			return err
		}
		return p.WriteJSON(p.Out, append(b, '\n'))
	case Name:
		return WriteNames(p.Out, msg)
	case YAML:
		b, err := MarshalYAML(msg)
		if err != nil {
			return err
		}
		if _, err := io.WriteString(p.Out, "---\n"); err != nil {
			return err
		}
		_, err = p.Out.Write(b)
		return err
	default:
		return text(p.view())
	}
}

func (p *Printer) view() View {
	return View{Out: p.Out, Notes: p.Notes, Now: p.Now(), Markdown: p.Format == Markdown, Wide: p.Format == Wide, Color: p.Color}
}

// MarshalJSON returns msg as indented JSON with a trailing newline.
//
// protojson deliberately varies its whitespace between runs; re-indenting with
// encoding/json makes the output byte-stable, which matters to people who
// diff or golden-test it.
func MarshalJSON(msg proto.Message) ([]byte, error) {
	raw, err := marshalOptions.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encoding %T as JSON: %w", msg, err)
	}
	var buf bytes.Buffer
	if err := json.Indent(&buf, raw, "", "  "); err != nil {
		return nil, err
	}
	buf.WriteByte('\n')
	return buf.Bytes(), nil
}

// MarshalCompactJSON returns msg as single-line JSON without a newline.
func MarshalCompactJSON(msg proto.Message) ([]byte, error) {
	raw, err := marshalOptions.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encoding %T as JSON: %w", msg, err)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// MarshalYAML returns the JSON form of msg converted to YAML (keys sorted).
func MarshalYAML(msg proto.Message) ([]byte, error) {
	raw, err := marshalOptions.Marshal(msg)
	if err != nil {
		return nil, fmt.Errorf("encoding %T as JSON: %w", msg, err)
	}
	return yaml.JSONToYAML(raw)
}

// Text returns a TableFunc that prints one formatted line.
func Text(format string, args ...any) TableFunc {
	return func(v View) error {
		_, err := fmt.Fprintf(v.Out, format+"\n", args...)
		return err
	}
}

// Struct turns a plain Go result (a struct with json tags) into the
// message Print writes as JSON or YAML, for commands whose answer is
// computed by the CLI rather than returned by the API.
func Struct(v any) (*structpb.Struct, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return structpb.NewStruct(m)
}
