package cloudlogtest

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	"cloud.google.com/go/logging/apiv2/loggingpb"
	"google.golang.org/protobuf/types/known/structpb"
)

// The evaluator below understands the part of the Logging query language
// that Falcon sends, and nothing more: comparisons of a known field with a
// quoted string (=, !=, =~, !~; >=, >, <=, < on timestamp only), joined by
// AND, with OR inside parentheses. Anything else (an unknown field, a bare
// word, a resource label k8s_container does not have, AND and OR mixed
// without parentheses) is refused, so that a change to the filter Falcon
// builds fails a test here instead of passing against a lenient fake and
// failing in production.
//
// Semantics follow Cloud Logging where Falcon relies on them: =~ is an RE2
// search (unanchored unless the pattern anchors itself), a comparison with a
// field the entry does not have is false for = and =~ and true for != and
// !~, and timestamps compare as instants.

// maxFilterLen is Cloud Logging's limit on a filter's length.
const maxFilterLen = 20000

// k8sContainerLabels are the resource labels of the k8s_container monitored
// resource type; a filter naming any other is a typo.
var k8sContainerLabels = map[string]bool{
	"project_id": true, "location": true, "cluster_name": true,
	"namespace_name": true, "pod_name": true, "container_name": true,
}

type node interface {
	match(e *loggingpb.LogEntry) bool
}

type andNode []node

func (n andNode) match(e *loggingpb.LogEntry) bool {
	for _, c := range n {
		if !c.match(e) {
			return false
		}
	}
	return true
}

type orNode []node

func (n orNode) match(e *loggingpb.LogEntry) bool {
	for _, c := range n {
		if c.match(e) {
			return true
		}
	}
	return false
}

type matchAll struct{}

func (matchAll) match(*loggingpb.LogEntry) bool { return true }

// cmpNode is one comparison of a field with a value.
type cmpNode struct {
	get   func(e *loggingpb.LogEntry) (string, bool) // string fields
	isTS  bool
	op    string
	value string
	re    *regexp.Regexp
	ts    time.Time
}

func (c *cmpNode) match(e *loggingpb.LogEntry) bool {
	if c.isTS {
		t := e.GetTimestamp().AsTime()
		switch c.op {
		case "=":
			return t.Equal(c.ts)
		case ">=":
			return !t.Before(c.ts)
		case ">":
			return t.After(c.ts)
		case "<=":
			return !t.After(c.ts)
		case "<":
			return t.Before(c.ts)
		}
		return false
	}
	v, ok := c.get(e)
	switch c.op {
	case "=":
		return ok && v == c.value
	case "!=":
		return !ok || v != c.value
	case "=~":
		return ok && c.re.MatchString(v)
	case "!~":
		return !ok || !c.re.MatchString(v)
	}
	return false
}

// parseFilter parses a filter into a matcher, or says what it does not
// understand.
func parseFilter(s string) (node, error) {
	if len(s) > maxFilterLen {
		return nil, fmt.Errorf("filter is %d characters long, more than the %d allowed", len(s), maxFilterLen)
	}
	toks, err := tokenize(s)
	if err != nil {
		return nil, err
	}
	if len(toks) == 0 {
		return matchAll{}, nil
	}
	p := &parser{toks: toks}
	n, err := p.expr()
	if err != nil {
		return nil, err
	}
	if !p.done() {
		return nil, fmt.Errorf("unexpected %q at offset %d", p.peek().text, p.peek().pos)
	}
	return n, nil
}

type tokKind int

const (
	tIdent tokKind = iota
	tString
	tOp
	tLParen
	tRParen
	tDot
)

type token struct {
	kind tokKind
	text string // for tString, the unquoted value
	pos  int
}

func tokenize(s string) ([]token, error) {
	var toks []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '(':
			toks = append(toks, token{tLParen, "(", i})
			i++
		case c == ')':
			toks = append(toks, token{tRParen, ")", i})
			i++
		case c == '.':
			toks = append(toks, token{tDot, ".", i})
			i++
		case c == '"':
			v, n, err := unquote(s[i:])
			if err != nil {
				return nil, fmt.Errorf("offset %d: %w", i, err)
			}
			toks = append(toks, token{tString, v, i})
			i += n
		case strings.ContainsRune("=!<>", rune(c)):
			op := string(c)
			if i+1 < len(s) && strings.ContainsRune("=~", rune(s[i+1])) {
				op += string(s[i+1])
			}
			switch op {
			case "=", "!=", "=~", "!~", ">=", "<=", ">", "<":
			default:
				return nil, fmt.Errorf("offset %d: operator %q is not supported", i, op)
			}
			toks = append(toks, token{tOp, op, i})
			i += len(op)
		case isIdentStart(c):
			j := i + 1
			for j < len(s) && (isIdentStart(s[j]) || (s[j] >= '0' && s[j] <= '9')) {
				j++
			}
			toks = append(toks, token{tIdent, s[i:j], i})
			i = j
		default:
			return nil, fmt.Errorf("offset %d: unexpected character %q", i, c)
		}
	}
	return toks, nil
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// unquote reads a double-quoted string at the start of s, whose only escapes
// are \\ and \", and returns its value and the number of bytes read.
func unquote(s string) (string, int, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		switch s[i] {
		case '"':
			return b.String(), i + 1, nil
		case '\\':
			if i+1 >= len(s) || (s[i+1] != '\\' && s[i+1] != '"') {
				return "", 0, fmt.Errorf("unsupported escape in string literal")
			}
			i++
			b.WriteByte(s[i])
		default:
			b.WriteByte(s[i])
		}
	}
	return "", 0, fmt.Errorf("unterminated string literal")
}

type parser struct {
	toks []token
	i    int
}

func (p *parser) done() bool  { return p.i >= len(p.toks) }
func (p *parser) peek() token { return p.toks[p.i] }
func (p *parser) next() token { t := p.toks[p.i]; p.i++; return t }
func (p *parser) isWord(w string) bool {
	return !p.done() && p.peek().kind == tIdent && p.peek().text == w
}

// expr is terms joined by one connective, AND or OR, never both: Cloud
// Logging gives OR the higher precedence, the opposite of what most readers
// expect, so Falcon always parenthesizes and an unparenthesized mix here
// means a bug in the filter builder.
func (p *parser) expr() (node, error) {
	first, err := p.term()
	if err != nil {
		return nil, err
	}
	nodes := []node{first}
	conn := ""
	for p.isWord("AND") || p.isWord("OR") {
		w := p.next()
		if conn != "" && w.text != conn {
			return nil, fmt.Errorf("offset %d: AND and OR mixed without parentheses", w.pos)
		}
		conn = w.text
		n, err := p.term()
		if err != nil {
			return nil, err
		}
		nodes = append(nodes, n)
	}
	switch conn {
	case "OR":
		return orNode(nodes), nil
	case "AND":
		return andNode(nodes), nil
	}
	return first, nil
}

func (p *parser) term() (node, error) {
	if p.done() {
		return nil, fmt.Errorf("filter ends where a comparison was expected")
	}
	if p.peek().kind == tLParen {
		p.next()
		n, err := p.expr()
		if err != nil {
			return nil, err
		}
		if p.done() || p.peek().kind != tRParen {
			return nil, fmt.Errorf("missing closing parenthesis")
		}
		p.next()
		return n, nil
	}
	return p.comparison()
}

func (p *parser) comparison() (node, error) {
	start := p.peek()
	var path []string
	for {
		if p.done() {
			return nil, fmt.Errorf("offset %d: comparison without an operator", start.pos)
		}
		t := p.next()
		if t.kind != tIdent && t.kind != tString {
			return nil, fmt.Errorf("offset %d: expected a field name, got %q", t.pos, t.text)
		}
		if t.kind == tIdent && (t.text == "AND" || t.text == "OR" || t.text == "NOT") {
			return nil, fmt.Errorf("offset %d: %s is not supported here", t.pos, t.text)
		}
		path = append(path, t.text)
		if p.done() || p.peek().kind != tDot {
			break
		}
		p.next()
	}
	if p.done() || p.peek().kind != tOp {
		return nil, fmt.Errorf("offset %d: field %s without a comparison (bare terms are not supported)", start.pos, strings.Join(path, "."))
	}
	op := p.next()
	if p.done() || p.peek().kind != tString {
		return nil, fmt.Errorf("offset %d: the value after %s must be a quoted string", op.pos, op.text)
	}
	val := p.next().text
	return newCmp(path, op.text, val)
}

func newCmp(path []string, op, val string) (node, error) {
	name := strings.Join(path, ".")
	c := &cmpNode{op: op, value: val}
	switch {
	case name == "timestamp":
		ts, err := time.Parse(time.RFC3339Nano, val)
		if err != nil {
			return nil, fmt.Errorf("timestamp value %q is not RFC 3339", val)
		}
		switch op {
		case "=", ">=", ">", "<=", "<":
		default:
			return nil, fmt.Errorf("operator %s is not supported on timestamp", op)
		}
		c.isTS, c.ts = true, ts
		return c, nil
	case name == "resource.type":
		c.get = func(e *loggingpb.LogEntry) (string, bool) { return e.GetResource().GetType(), e.GetResource() != nil }
	case len(path) == 3 && path[0] == "resource" && path[1] == "labels":
		key := path[2]
		if !k8sContainerLabels[key] {
			return nil, fmt.Errorf("k8s_container has no resource label %q", key)
		}
		c.get = func(e *loggingpb.LogEntry) (string, bool) {
			v, ok := e.GetResource().GetLabels()[key]
			return v, ok
		}
	case len(path) == 2 && path[0] == "labels":
		key := path[1]
		c.get = func(e *loggingpb.LogEntry) (string, bool) {
			v, ok := e.GetLabels()[key]
			return v, ok
		}
	case name == "textPayload":
		c.get = func(e *loggingpb.LogEntry) (string, bool) {
			p, ok := e.GetPayload().(*loggingpb.LogEntry_TextPayload)
			if !ok {
				return "", false
			}
			return p.TextPayload, true
		}
	case name == "jsonPayload.message":
		c.get = func(e *loggingpb.LogEntry) (string, bool) {
			v, ok := e.GetJsonPayload().GetFields()["message"]
			if !ok {
				return "", false
			}
			sv, ok := v.GetKind().(*structpb.Value_StringValue)
			if !ok {
				return "", false
			}
			return sv.StringValue, true
		}
	default:
		return nil, fmt.Errorf("field %s is not supported", name)
	}
	switch op {
	case "=", "!=":
	case "=~", "!~":
		re, err := regexp.Compile(val)
		if err != nil {
			return nil, fmt.Errorf("invalid regular expression %q: %v", val, err)
		}
		c.re = re
	default:
		return nil, fmt.Errorf("operator %s is only supported on timestamp", op)
	}
	return c, nil
}
