package output

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// ColorMode is --color: whether tables colour statuses.
type ColorMode string

const (
	ColorAuto   ColorMode = "auto"
	ColorAlways ColorMode = "always"
	ColorNever  ColorMode = "never"
)

// ColorModes are the values --color accepts.
var ColorModes = []string{string(ColorAuto), string(ColorAlways), string(ColorNever)}

// ColorFlag is a pflag.Value for --color; its zero value is auto.
type ColorFlag struct{ Value ColorMode }

func (f *ColorFlag) String() string {
	if f.Value == "" {
		return string(ColorAuto)
	}
	return string(f.Value)
}

// Set implements pflag.Value.
func (f *ColorFlag) Set(s string) error {
	for _, m := range ColorModes {
		if strings.EqualFold(s, m) {
			f.Value = ColorMode(m)
			return nil
		}
	}
	return fmt.Errorf("must be one of %s", strings.Join(ColorModes, ", "))
}

// Type implements pflag.Value.
func (f *ColorFlag) Type() string { return "when" }

// UseColor decides whether to colour: always and never are what they say;
// auto colours a terminal unless NO_COLOR is set to anything non-empty
// (https://no-color.org) or TERM is dumb. An explicit --color=always beats
// NO_COLOR, as that convention asks.
func UseColor(mode ColorMode, stdoutTTY bool, getenv func(string) string) bool {
	switch mode {
	case ColorAlways:
		return true
	case ColorNever:
		return false
	}
	if getenv != nil && (getenv("NO_COLOR") != "" || getenv("TERM") == "dumb") {
		return false
	}
	return stdoutTTY
}

// SGR codes of the status colours.
const (
	green   = "32"
	red     = "31"
	yellow  = "33"
	blue    = "34"
	magenta = "35"
)

// statusColors colours what a status says to someone scanning a table:
// green done well, red failed, yellow waiting, blue working, magenta
// stopped by someone. Cluster states share the scheme.
var statusColors = map[string]string{
	"succeeded": green, "active": green, "ready": green,
	"failed": red, "offline": red, "error": red,
	"created": yellow, "pending": yellow, "maintenance": yellow, "queued": yellow,
	"running":  blue,
	"aborting": magenta, "aborted": magenta,
}

// Paint wraps s in the colour of the status it names (matched
// case-insensitively); statuses it does not know, and an empty s, are left
// as they are.
func Paint(s string) string {
	c, ok := statusColors[strings.ToLower(strings.TrimSpace(s))]
	if !ok || s == "" {
		return s
	}
	return "\x1b[" + c + "m" + s + "\x1b[0m"
}

// Status is how the view shows a status: coloured when it colours.
func (v View) Status(s string) string {
	if !v.Color {
		return s
	}
	return Paint(s)
}

// visibleWidth is the number of runes of s a terminal shows: SGR escape
// sequences ("\x1b[...m") take no room.
func visibleWidth(s string) int {
	n := 0
	for i := 0; i < len(s); {
		if s[i] == 0x1b && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && s[j] != 'm' {
				j++
			}
			i = j + 1
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		n++
		i += size
	}
	return n
}
