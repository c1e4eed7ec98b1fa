package sqlstore

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/falconhq/falcon/internal/errdefs"
	"github.com/falconhq/falcon/internal/store"
)

const (
	defaultPageSize = 50
	maxPageSize     = 1000
)

// A page token is the seq of the last row returned, base64url-encoded so
// callers treat it as opaque and the encoding can change without breaking
// the API. Keyset pagination ("seq < token") costs the same at any depth,
// and rows inserted or deleted between pages neither repeat nor shift
// others out.
func encodeToken(seq int64) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(seq, 10)))
}

func decodeToken(tok string) (int64, error) {
	b, err := base64.RawURLEncoding.DecodeString(tok)
	if err != nil {
		return 0, errdefs.Invalid("page_token", "is not a token this server issued")
	}
	seq, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil || seq <= 0 {
		return 0, errdefs.Invalid("page_token", "is not a token this server issued")
	}
	return seq, nil
}

// pageBounds returns the page size and the seq to continue after (0 for the
// first page).
func pageBounds(p store.Page) (size int, after int64, err error) {
	switch {
	case p.Size < 0:
		return 0, 0, errdefs.Invalid("page_size", "must not be negative, got %d", p.Size)
	case p.Size == 0:
		size = defaultPageSize
	case p.Size > maxPageSize:
		size = maxPageSize
	default:
		size = p.Size
	}
	if p.Token != "" {
		if after, err = decodeToken(p.Token); err != nil {
			return 0, 0, err
		}
	}
	return size, after, nil
}

// conds collects the WHERE clause of a list query.
type conds struct {
	where []string
	args  []any
}

// eq adds "col = v" unless v is empty, which in a filter means "any".
func (c *conds) eq(col, v string) {
	if v != "" {
		c.add(col+" = ?", v)
	}
}

// in adds "col IN (vs...)" unless vs is empty.
func (c *conds) in(col string, vs []string) {
	if len(vs) == 0 {
		return
	}
	args := make([]any, len(vs))
	for i, v := range vs {
		args[i] = v
	}
	c.add(col+" IN "+placeholders(len(vs)), args...)
}

func (c *conds) add(cond string, args ...any) {
	c.where = append(c.where, cond)
	c.args = append(c.args, args...)
}

func (c *conds) sql() string {
	if len(c.where) == 0 {
		return ""
	}
	return " WHERE " + strings.Join(c.where, " AND ")
}

// listPage runs a keyset-paginated query over table: newest first when desc,
// else oldest first. It fetches one row more than the page to learn whether
// another page follows, so the last page never ends with an empty one.
func listPage[T any](ctx context.Context, q querier, table, cols string, c conds, p store.Page, desc bool,
	scan func(scanner) (T, int64, error)) (items []T, next string, err error) {
	size, after, err := pageBounds(p)
	if err != nil {
		return nil, "", err
	}
	query, args := pageQuery(table, cols, c, size, after, desc)
	rows, err := q.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, "", dbErr("list "+table, err)
	}
	defer rows.Close()
	var seqs []int64
	for rows.Next() {
		item, seq, err := scan(rows)
		if err != nil {
			return nil, "", dbErr("list "+table, err)
		}
		items = append(items, item)
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", dbErr("list "+table, err)
	}
	if len(items) > size {
		items = items[:size]
		next = encodeToken(seqs[size-1])
	}
	return items, next, nil
}

// pageQuery is listPage's query for a page of size rows after the row with
// seq after (0: from the start).
func pageQuery(table, cols string, c conds, size int, after int64, desc bool) (string, []any) {
	order, past := " ORDER BY seq ASC", "seq > ?"
	if desc {
		order, past = " ORDER BY seq DESC", "seq < ?"
	}
	if after > 0 {
		c.add(past, after)
	}
	return "SELECT " + cols + " FROM " + table + c.sql() + order + " LIMIT ?", append(c.args, size+1)
}
