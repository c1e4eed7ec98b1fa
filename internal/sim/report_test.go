package sim

import (
	"encoding/csv"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/parquet-go/parquet-go"
)

// TestTimelineParquetMatchesCSV writes one policy's timeline in both
// formats and reads the Parquet file back with the library: every row
// reads as the CSV file's.
func TestTimelineParquetMatchesCSV(t *testing.T) {
	tr := dayTrace(t)
	p, _ := ParsePolicy("linger=20m")
	r, err := Simulate(tr, DefaultConfig(tr), p, 1)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, format := range []string{FormatCSV, FormatParquet} {
		if err := WriteTimelines(dir, format, []*Result{r}); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open(filepath.Join(dir, "linger-20m.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	want, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	rows, err := parquet.ReadFile[TimelineRow](filepath.Join(dir, "linger-20m.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	got := [][]string{TimelineHeader}
	for _, row := range rows {
		got = append(got, row.CSV())
	}
	if len(want) != len(tr)+1 {
		t.Fatalf("CSV has %d lines, want a header and %d jobs", len(want), len(tr))
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parquet rows (+) vs CSV rows (-):\n%s", diff)
	}
	// The columns are named as the CSV header, so tools read them alike.
	pf, err := os.Open(filepath.Join(dir, "linger-20m.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer pf.Close()
	st, _ := pf.Stat()
	file, err := parquet.OpenFile(pf, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range file.Schema().Fields() {
		cols = append(cols, c.Name())
	}
	if diff := cmp.Diff(TimelineHeader, cols); diff != "" {
		t.Errorf("Parquet columns (-want +got):\n%s", diff)
	}
	if err := WriteTimelines(dir, "xlsx", []*Result{r}); err == nil {
		t.Error("format xlsx accepted")
	}
}
