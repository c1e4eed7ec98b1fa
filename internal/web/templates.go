package web

import (
	"embed"
	"html/template"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/output"
)

//go:embed templates
var templateFS embed.FS

// pageNames are the pages; each is parsed with the layout.
var pageNames = []string{"list.html", "exp.html", "clusters.html", "compare.html", "error.html"}

func parsePages() map[string]*template.Template {
	funcs := template.FuncMap{
		"asset": assetURL,
		"ago": func(now time.Time, ts *timestamppb.Timestamp) string {
			if ts == nil {
				return ""
			}
			return output.Age(now, ts) + " ago"
		},
		"since": func(now time.Time, ts *timestamppb.Timestamp) string {
			if ts == nil {
				return ""
			}
			return output.Age(now, ts)
		},
		"stamp": func(ts *timestamppb.Timestamp) string {
			if ts == nil {
				return ""
			}
			return ts.AsTime().UTC().Format(time.RFC3339)
		},
		"dur": func(d *durationpb.Duration) string {
			if d == nil {
				return ""
			}
			return d.AsDuration().String()
		},
		"lower":   strings.ToLower,
		"join":    strings.Join,
		"bytes":   output.Bytes,
		"files":   output.Files,
		"num":     func(v float64) string { return strconv.FormatFloat(v, 'g', 5, 64) },
		"pct":     func(v float64) string { return strconv.FormatFloat(v*100, 'f', 1, 64) + "%" },
		"in":      func(list []string, s string) bool { return slices.Contains(list, s) },
		"shape":   shape,
		"fileURL": fileURL,
		"expURL":  func(id string) string { return Prefix + "experiments/" + url.PathEscape(id) },
		"compareURL": func(ids []string, all bool) string {
			q := url.Values{"id": ids}
			if all {
				q.Set("all", "1")
			}
			return Prefix + "compare?" + q.Encode()
		},
		"roleReplica": func(e *falconv1.Experiment, role string) int32 {
			return e.GetRoleToTaskSpec()[role].GetReplica()
		},
		"dict": func(kv ...any) map[string]any {
			m := map[string]any{}
			for i := 0; i+1 < len(kv); i += 2 {
				m[kv[i].(string)] = kv[i+1]
			}
			return m
		},
	}
	out := map[string]*template.Template{}
	for _, name := range pageNames {
		out[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", "templates/"+name))
	}
	return out
}

// fileURL is where the API serves an artifact file's bytes (GET
// /v1/experiments/{id}/files/{path}, ranges honoured), each segment of the
// path escaped so that names with spaces, "#" or "?" reach the file.
func fileURL(expID, path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return "/v1/experiments/" + url.PathEscape(expID) + "/files/" + strings.Join(segs, "/")
}
