package output

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"
)

// Column is one column of a list table: a header and how to get the cell
// from a row.
type Column[T any] struct {
	Header string
	Value  func(T) string
}

// WriteTable writes rows under the columns' headers, aligned. Cells are made
// single-line and empty cells shown as "-" so columns stay readable. A cell
// may hold colour (View.Status): alignment counts only what a terminal
// shows.
func WriteTable[T any](w io.Writer, cols []Column[T], rows []T) error {
	cells := make([][]string, 0, len(rows)+1)
	headers := make([]string, len(cols))
	for i, c := range cols {
		headers[i] = c.Header
	}
	cells = append(cells, headers)
	for _, r := range rows {
		line := make([]string, len(cols))
		for i, c := range cols {
			line[i] = Cell(c.Value(r))
		}
		cells = append(cells, line)
	}
	return writeAligned(w, cells)
}

// writeAligned pads every cell but a line's last to its column's width
// plus two spaces, as text/tabwriter would if it could see through colour.
func writeAligned(w io.Writer, lines [][]string) error {
	var widths []int
	for _, l := range lines {
		for i, c := range l {
			if i == len(l)-1 {
				break
			}
			for len(widths) <= i {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], visibleWidth(c))
		}
	}
	var b strings.Builder
	for _, l := range lines {
		for i, c := range l {
			b.WriteString(c)
			if i < len(l)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-visibleWidth(c)+2))
			}
		}
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteMarkdown writes a Markdown table. Pipes and newlines in cells are
// escaped, so a command line or a config value cannot break the table.
func WriteMarkdown(w io.Writer, headers []string, rows [][]string) error {
	esc := strings.NewReplacer("|", `\|`, "\n", "<br>", "\r", "")
	line := func(cells []string) string {
		out := make([]string, len(cells))
		for i, c := range cells {
			out[i] = esc.Replace(c)
		}
		return "| " + strings.Join(out, " | ") + " |\n"
	}
	sep := make([]string, len(headers))
	for i := range sep {
		sep[i] = "---"
	}
	var b strings.Builder
	b.WriteString(line(headers))
	b.WriteString(line(sep))
	for _, r := range rows {
		b.WriteString(line(r))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteRows writes a table of plain rows: Markdown when the view asks for
// it (-o md), else aligned columns whose cells are cut to one line
// (Cell), for tables a command computes rather than lists.
func WriteRows(v View, headers []string, rows [][]string) error {
	if v.Markdown {
		return WriteMarkdown(v.Out, headers, rows)
	}
	cols := make([]Column[[]string], len(headers))
	for i, h := range headers {
		cols[i] = Column[[]string]{Header: h, Value: func(r []string) string { return r[i] }}
	}
	return WriteTable(v.Out, cols, rows)
}

// Field is one line of a key/value block.
type Field struct {
	Key, Value string
}

// WriteFields writes "Key:  value" lines with the values aligned. Fields
// with an empty value are left out: a detail view shows what is set.
func WriteFields(w io.Writer, fields []Field) error {
	tw := newTabWriter(w)
	for _, f := range fields {
		if f.Value == "" {
			continue
		}
		fmt.Fprintf(tw, "%s:\t%s\n", f.Key, oneLine(f.Value))
	}
	return tw.Flush()
}

func newTabWriter(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// maxCell keeps one long message from pushing every other column off screen;
// the full text is in -o json and in the detail views.
const maxCell = 80

// Cell prepares a table cell: one line, at most maxCell runes, "-" if empty.
func Cell(s string) string {
	s = oneLine(s)
	if s == "" {
		return "-"
	}
	if r := []rune(s); len(r) > maxCell {
		return string(r[:maxCell-1]) + "…"
	}
	return s
}

func oneLine(s string) string {
	s = strings.TrimSpace(s)
	return strings.Join(strings.Fields(s), " ")
}

// Age is the time since ts in a short form ("45s", "12m", "5h", "3d"), or ""
// when ts is unset.
func Age(now time.Time, ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	d := now.Sub(ts.AsTime())
	if d < 0 {
		d = 0
	}
	return ShortDuration(d)
}

// ShortDuration formats d with its largest sensible unit.
func ShortDuration(d time.Duration) string {
	switch {
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// Timestamp formats ts as RFC 3339 in UTC followed by its age, or "" when
// unset.
func Timestamp(now time.Time, ts *timestamppb.Timestamp) string {
	if ts == nil {
		return ""
	}
	return fmt.Sprintf("%s (%s ago)", ts.AsTime().UTC().Format(time.RFC3339), Age(now, ts))
}
