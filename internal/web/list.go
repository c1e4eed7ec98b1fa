package web

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	falconv1 "github.com/falconhq/falcon/api/falcon/v1"
	"github.com/falconhq/falcon/internal/lifecycle"
)

const (
	defaultLimit = 50
	maxLimit     = 200
	// scanBudget bounds the experiments one list page reads to match a
	// part of a name, which ListExps cannot filter by (it takes a whole
	// name or a prefix): past it the page shows what it found and links to
	// where the scan stopped, so a rare name never makes a page read all
	// 10^5 experiments.
	scanBudget = 2000
	// scanPage is the server page a scan reads: a few large pages cost
	// less than many small ones, and the Next link resumes inside one.
	scanPage = 250
)

// listFilter is the experiment list's query: what ListExps filters on the
// server (status, creator, cluster, type, tag), what the page matches
// itself (a part of the name, in any case), and where the page starts.
type listFilter struct {
	Status, Creator, Cluster, Type string
	Name, Tag                      string
	Limit                          int
	// Page is ListExps's token for the page the list starts in; Skip
	// matches of it were shown on the page before (name only).
	Page string
	Skip int
}

func parseListFilter(r *http.Request) (listFilter, error) {
	f := listFilter{
		Status: query(r, "status"), Creator: query(r, "creator"), Cluster: query(r, "cluster"),
		Type: query(r, "type"), Name: query(r, "name"), Tag: query(r, "tag"),
		Page: query(r, "page"), Limit: defaultLimit,
	}
	if s := query(r, "limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > maxLimit {
			return f, badRequest("limit", "%q must be a number from 1 to %d", s, maxLimit)
		}
		f.Limit = n
	}
	if s := query(r, "skip"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return f, badRequest("skip", "%q must be a number of 0 or more (it comes from a Next link)", s)
		}
		f.Skip = n
	}
	return f, nil
}

// local reports whether the page must match rows itself.
func (f listFilter) local() bool { return f.Name != "" }

func (f listFilter) match(e *falconv1.Experiment) bool {
	return strings.Contains(strings.ToLower(e.GetName()), strings.ToLower(f.Name))
}

// url is the list at page (token, skip) with the same filters.
func (f listFilter) url(token string, skip int) string {
	q := url.Values{}
	for k, v := range map[string]string{"status": f.Status, "creator": f.Creator, "cluster": f.Cluster,
		"type": f.Type, "name": f.Name, "tag": f.Tag, "page": token} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if skip > 0 {
		q.Set("skip", strconv.Itoa(skip))
	}
	if f.Limit != defaultLimit {
		q.Set("limit", strconv.Itoa(f.Limit))
	}
	if len(q) == 0 {
		return Prefix
	}
	return Prefix + "?" + q.Encode()
}

// listView is the experiments page.
type listView struct {
	Filter   listFilter
	Rows     []*falconv1.Experiment
	Next     string // the next page's URL; "" on the last
	First    string // the first page's URL, when this is not it
	Scanned  int    // experiments read to match the name
	Stopped  bool   // the scan hit scanBudget before the page filled
	Statuses []string
	Clusters []string
	Terminal []string
}

func (h *Handler) listPage(w http.ResponseWriter, r *http.Request) {
	f, err := parseListFilter(r)
	if err != nil {
		h.fail(w, r, err)
		return
	}
	ctx := h.call(r)
	v := listView{Filter: f, Terminal: statusNames(lifecycle.ExperimentMachine.Terminal)}
	v.Statuses = statusNames(lifecycle.ExperimentMachine.Statuses())
	if f.Page != "" || f.Skip > 0 {
		v.First = f.url("", 0)
	}
	req := &falconv1.ListExpsRequest{
		PageSize: int32(f.Limit), PageToken: f.Page,
		Status: f.Status, Creator: f.Creator, ClusterName: f.Cluster, ExpType: f.Type,
	}
	if f.Tag != "" {
		req.Tags = []string{f.Tag}
	}
	if !f.local() {
		resp, err := h.exps.ListExps(ctx, req)
		if err != nil {
			h.fail(w, r, err)
			return
		}
		v.Rows = resp.GetItems()
		if t := resp.GetNextPageToken(); t != "" {
			v.Next = f.url(t, 0)
		}
	} else if err := h.scan(ctx, f, req, &v); err != nil {
		h.fail(w, r, err)
		return
	}
	// The filter's choices; a failure here costs the menu, not the page.
	if cl, err := h.clusters.ListClusters(ctx, &falconv1.ListClustersRequest{}); err == nil {
		for _, c := range cl.GetItems() {
			v.Clusters = append(v.Clusters, c.GetName())
		}
	}
	h.render(w, r, http.StatusOK, "list.html", page{Title: "Experiments", Nav: "experiments", Data: v})
}

// scan fills the page with experiments whose name holds f.Name, reading
// ListExps pages (the server's filters applied) until the page is full, the
// list ends, or scanBudget rows were read. A page that fills in the middle
// of a server page resumes there: the Next link names that page's token
// and how many of its matches were shown.
func (h *Handler) scan(ctx context.Context, f listFilter, req *falconv1.ListExpsRequest, v *listView) error {
	token, skip := f.Page, f.Skip
	req.PageSize = scanPage
	for {
		req.PageToken = token
		resp, err := h.exps.ListExps(ctx, req)
		if err != nil {
			return err
		}
		v.Scanned += len(resp.GetItems())
		seen := 0
		for _, e := range resp.GetItems() {
			if !f.match(e) {
				continue
			}
			seen++
			if seen <= skip {
				continue
			}
			if len(v.Rows) == f.Limit {
				v.Next = f.url(token, seen-1)
				return nil
			}
			v.Rows = append(v.Rows, e)
		}
		skip = 0
		next := resp.GetNextPageToken()
		switch {
		case next == "":
			return nil
		case len(v.Rows) == f.Limit || v.Scanned >= scanBudget:
			v.Stopped = len(v.Rows) < f.Limit
			v.Next = f.url(next, 0)
			return nil
		}
		token = next
	}
}

func statusNames(ss []lifecycle.Status) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}
