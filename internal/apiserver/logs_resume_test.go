package apiserver_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// falcon dev's logs carry resume tokens too: the byte offset after the last
// line sent of each pod, so a client that reconnects (to this server or to
// the next one on the same data dir) gets exactly the lines after the last
// it printed, and never again what --tail skipped.
func TestLocalLogsResume(t *testing.T) {
	e := start(t)
	_, exp := e.http(t, "POST", "/v1/experiments", twoRoles)
	id := exp["id"].(string)
	var worker string
	for _, j := range exp["jobs"].([]any) {
		if j := j.(map[string]any); j["role"] == "worker" {
			worker = j["id"].(string)
		}
	}
	dir := filepath.Join(e.logDir, worker)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := func(rank string) string { return filepath.Join(dir, worker+"-"+rank+".log") }
	appendTo := func(rank, s string) {
		f, err := os.OpenFile(file(rank), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	appendTo("0", "r0 a\nr0 b\nr0 c\n")
	appendTo("1", "r1 a\n")

	// read returns the lines ("rank:text") and the last resume token.
	read := func(q url.Values) ([]string, string) {
		t.Helper()
		resp, err := http.Get(e.base + "/v1/experiments/" + id + "/logs?" + q.Encode())
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var lines []string
		var tok string
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			var msg struct {
				Result struct {
					Lines []struct {
						Rank   float64 `json:"rank"`
						Line   string  `json:"line"`
						Resume string  `json:"resume"`
					} `json:"lines"`
				} `json:"result"`
				Error any `json:"error"`
			}
			if err := json.Unmarshal(sc.Bytes(), &msg); err != nil || msg.Error != nil {
				t.Fatalf("stream line %q: %v", sc.Text(), err)
			}
			for _, l := range msg.Result.Lines {
				lines = append(lines, string(rune('0'+int(l.Rank)))+":"+l.Line)
				if l.Resume != "" {
					tok = l.Resume
				}
			}
		}
		return lines, tok
	}
	got, tok := read(url.Values{"role": {"worker"}, "tail": {"2"}})
	if strings.Join(got, "|") != "0:r0 b|0:r0 c|1:r1 a" || tok == "" {
		t.Fatalf("tail=2: %v, token %q", got, tok)
	}
	appendTo("0", "r0 d\n")
	appendTo("1", "r1 b\n")
	appendTo("2", "r2 a\n") // a rank whose log appeared since: read whole
	got, tok2 := read(url.Values{"role": {"worker"}, "resume": {tok}})
	if strings.Join(got, "|") != "0:r0 d|1:r1 b|2:r2 a" {
		t.Fatalf("resumed: %v, want only the lines written since", got)
	}
	if got, _ := read(url.Values{"role": {"worker"}, "resume": {tok2}}); len(got) != 0 {
		t.Errorf("resumed at the end: %v, want nothing", got)
	}
	if _, body := e.http(t, "GET", "/v1/experiments/"+id+"/logs?resume=garbage", ""); !strings.Contains(fmt.Sprint(body), "not a resume token this server issued") {
		t.Errorf("a token this server never issued: %v", body)
	}
}
