package skillcheck

import (
	"bytes"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"
)

// Skill is one SKILL.md.
type Skill struct {
	Path        string
	Name        string `json:"name"`
	Description string `json:"description"`
	Blocks      []Block
}

// Block is one fenced code block.
type Block struct {
	// Info is the fence's info string ("sh", "sh main").
	Info string
	// Line is the file's line number of the block's first content line.
	Line  int
	Lines []string
}

// Shell reports whether the block holds shell commands.
func (b Block) Shell() bool {
	switch strings.Fields(b.Info + " x")[0] {
	case "sh", "bash", "shell", "console", "zsh":
		return true
	}
	return false
}

// Main reports whether the block is part of the skill's main path.
func (b Block) Main() bool {
	return b.Shell() && strings.Contains(" "+b.Info+" ", " main ")
}

// Parse reads a skill: its front matter must name it and describe it, as
// agent tools require to load it.
func Parse(path string, data []byte) (*Skill, error) {
	lines := strings.Split(strings.ReplaceAll(string(data), "\r\n", "\n"), "\n")
	if len(lines) == 0 || lines[0] != "---" {
		return nil, fmt.Errorf("%s:1: no YAML front matter (a first line ---, then name: and description:, then ---)", path)
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if lines[i] == "---" {
			end = i
			break
		}
	}
	if end < 0 {
		return nil, fmt.Errorf("%s:1: front matter is not closed by a line ---", path)
	}
	s := &Skill{Path: path}
	fm := strings.Join(lines[1:end], "\n")
	if err := yaml.Unmarshal([]byte(fm), s); err != nil {
		return nil, fmt.Errorf("%s:2: front matter: %v", path, err)
	}
	var missing []string
	if strings.TrimSpace(s.Name) == "" {
		missing = append(missing, "name")
	}
	if strings.TrimSpace(s.Description) == "" {
		missing = append(missing, "description")
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%s:2: front matter lacks %s", path, strings.Join(missing, " and "))
	}
	var cur *Block
	for i := end + 1; i < len(lines); i++ {
		l := lines[i]
		trimmed := strings.TrimSpace(l)
		if strings.HasPrefix(trimmed, "```") {
			if cur == nil {
				cur = &Block{Info: strings.TrimSpace(strings.TrimPrefix(trimmed, "```")), Line: i + 2}
				continue
			}
			s.Blocks = append(s.Blocks, *cur)
			cur = nil
			continue
		}
		if cur != nil {
			cur.Lines = append(cur.Lines, l)
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: code block not closed", path, cur.Line-1)
	}
	return s, nil
}

// Script is the skill's main path: its main blocks, in order, as one
// script; "" when it has none.
func (s *Skill) Script() string {
	var b bytes.Buffer
	for _, bl := range s.Blocks {
		if bl.Main() {
			fmt.Fprintf(&b, "# %s:%d\n%s\n", s.Path, bl.Line, strings.Join(bl.Lines, "\n"))
		}
	}
	return b.String()
}
