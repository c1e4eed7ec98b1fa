package output

import (
	"fmt"
	"strconv"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
)

// Files is "1 file" or "n files".
func Files(n int64) string {
	if n == 1 {
		return "1 file"
	}
	return fmt.Sprintf("%d files", n)
}

// Bytes is n in binary units, as people read sizes: 0 B, 512 B, 1.5 KiB,
// 3.2 GiB.
func Bytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	v := float64(n)
	for _, unit := range []string{"KiB", "MiB", "GiB", "TiB"} {
		v /= 1024
		if v < 1024 || unit == "TiB" {
			return fmt.Sprintf("%.1f %s", v, unit)
		}
	}
	return ""
}

// FileColumns are the columns of `falcon artifact ls`.
func FileColumns(v View) []Column[*falconv1.ArtifactFile] {
	return []Column[*falconv1.ArtifactFile]{
		{"PATH", func(f *falconv1.ArtifactFile) string { return f.GetPath() }},
		{"SIZE", func(f *falconv1.ArtifactFile) string { return Bytes(f.GetSize()) }},
		{"UPDATED", func(f *falconv1.ArtifactFile) string { return Age(v.Now, f.GetUpdated()) }},
		{"CHECKSUM", func(f *falconv1.ArtifactFile) string { return f.GetChecksum() }},
	}
}

// FileList is the table view of a ListArtifactFilesResponse.
func FileList(resp *falconv1.ListArtifactFilesResponse) TableFunc {
	return func(v View) error {
		if err := writeList(v, "files", resp.GetItems(), FileColumns(v), resp.GetNextPageToken()); err != nil {
			return err
		}
		if !resp.GetComplete() {
			_, err := fmt.Fprintln(v.Notes, "The experiment has not ended: its job may still write files.")
			return err
		}
		return nil
	}
}
