package skillcheck

import (
	"regexp"
	"strings"
)

// Word is one shell word, quotes removed.
type Word struct {
	Text string
	// Placeholder: the word holds an expansion ($VAR, $(...)) or a
	// <PLACEHOLDER>, so it stands for a value the check cannot know.
	Placeholder bool
}

// Command is one `falcon ...` command line found in a skill.
type Command struct {
	Line int
	// Words are the command's words, "falcon" first.
	Words []Word
	Text  string
}

// Commands are every falcon command line in the skill's shell blocks,
// those inside $(...) included.
func (s *Skill) Commands() []Command {
	var out []Command
	for _, b := range s.Blocks {
		if !b.Shell() {
			continue
		}
		for i := 0; i < len(b.Lines); i++ {
			line, start := b.Lines[i], i
			for strings.HasSuffix(line, "\\") && i+1 < len(b.Lines) {
				i++
				line = strings.TrimSuffix(line, "\\") + " " + b.Lines[i]
			}
			out = append(out, commandsIn(line, b.Line+start)...)
		}
	}
	return out
}

var placeholderAt = regexp.MustCompile(`^<[A-Za-z_][A-Za-z0-9_]*>`)

var placeholderRE = regexp.MustCompile(`<[A-Za-z_][A-Za-z0-9_]*>|\$`)

type token struct {
	op   string // an operator, or "" for a word
	word Word
}

// lex splits a line into words and operators. Command substitutions are
// cut out whole (their commands are found by commandsIn on their inside)
// and leave a placeholder in the word.
func lex(line string, subst func(inner string)) []token {
	var toks []token
	var cur strings.Builder
	inWord, ph := false, false
	flush := func() {
		if inWord {
			toks = append(toks, token{word: Word{Text: cur.String(), Placeholder: ph || placeholderRE.MatchString(cur.String())}})
		}
		cur.Reset()
		inWord, ph = false, false
	}
	// substitution reads $( ... ) from i (at '$'), returns the index after.
	substitution := func(i int) int {
		depth, j := 0, i+1
		for ; j < len(line); j++ {
			switch line[j] {
			case '(':
				depth++
			case ')':
				depth--
			case '\'':
				if k := strings.IndexByte(line[j+1:], '\''); k >= 0 {
					j += k + 1
				}
			}
			if depth == 0 {
				break
			}
		}
		subst(line[i+2 : min(j, len(line))])
		return j + 1
	}
	for i := 0; i < len(line); {
		c := line[i]
		switch {
		case c == '\'':
			inWord = true
			k := strings.IndexByte(line[i+1:], '\'')
			if k < 0 {
				k = len(line) - i - 1
			}
			cur.WriteString(line[i+1 : i+1+k])
			i += k + 2
		case c == '"':
			inWord = true
			i++
			for i < len(line) && line[i] != '"' {
				if line[i] == '\\' && i+1 < len(line) {
					cur.WriteByte(line[i+1])
					i += 2
					continue
				}
				if line[i] == '$' && i+1 < len(line) && line[i+1] == '(' {
					i = substitution(i)
					ph = true
					continue
				}
				cur.WriteByte(line[i])
				i++
			}
			i++
		case c == '\\' && i+1 < len(line):
			inWord = true
			cur.WriteByte(line[i+1])
			i += 2
		case c == '$' && i+1 < len(line) && line[i+1] == '(':
			inWord, ph = true, true
			i = substitution(i)
		case c == '#' && !inWord:
			flush()
			return toks
		case c == ' ' || c == '\t':
			flush()
			i++
		case c == '|' || c == '&' || c == ';' || c == '(' || c == ')':
			flush()
			op := string(c)
			if i+1 < len(line) && (line[i+1] == c) {
				op += string(c)
			}
			toks = append(toks, token{op: op})
			i += len(op)
		case c == '<' && placeholderAt.MatchString(line[i:]):
			// <EXP>: a placeholder, not a redirection.
			m := placeholderAt.FindString(line[i:])
			inWord, ph = true, true
			cur.WriteString(m)
			i += len(m)
		case c == '>' || c == '<':
			// A redirection: an fd number before it and its target after
			// it are no arguments.
			if inWord && strings.Trim(cur.String(), "0123456789") == "" {
				cur.Reset()
				inWord = false
			}
			flush()
			i++
			for i < len(line) && (line[i] == '>' || line[i] == '&') {
				i++
			}
			toks = append(toks, token{op: "redirect"})
		default:
			inWord = true
			cur.WriteByte(c)
			i++
		}
	}
	flush()
	return toks
}

var keywords = map[string]bool{"if": true, "then": true, "else": true, "elif": true, "do": true, "while": true, "until": true, "!": true, "time": true, "exec": true, "command": true}

var assignmentRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*=`)

func commandsIn(line string, lineNo int) []Command {
	var out []Command
	toks := lex(line, func(inner string) { out = append(out, commandsIn(inner, lineNo)...) })
	atStart := true
	var cur *Command
	end := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	skipTarget := false
	for _, t := range toks {
		if t.op == "redirect" {
			skipTarget = true
			continue
		}
		if t.op != "" {
			end()
			atStart = true
			continue
		}
		if skipTarget {
			skipTarget = false
			continue
		}
		switch {
		case cur != nil:
			cur.Words = append(cur.Words, t.word)
		case atStart && (keywords[t.word.Text] || assignmentRE.MatchString(t.word.Text)):
			// still at the command's start
		case atStart && t.word.Text == "falcon" && !t.word.Placeholder:
			cur = &Command{Line: lineNo, Words: []Word{t.word}, Text: strings.TrimSpace(line)}
			atStart = false
		default:
			atStart = false
		}
	}
	end()
	return out
}

// String is the command's words joined, for messages.
func (c Command) String() string {
	parts := make([]string, len(c.Words))
	for i, w := range c.Words {
		parts[i] = w.Text
		if strings.ContainsAny(w.Text, " |\"") {
			parts[i] = "'" + w.Text + "'"
		}
	}
	return strings.Join(parts, " ")
}
