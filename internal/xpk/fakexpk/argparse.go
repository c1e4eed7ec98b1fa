package main

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// kind is how argparse stores a flag.
type kind int

const (
	kString kind = iota
	kInt
	kTrue     // store_true
	kOptional // BooleanOptionalAction: --x and --no-x
	kAppend
)

type flag struct {
	name     string
	short    string // -tgps
	kind     kind
	required bool
	choices  []string
	check    func(string) string // a type= function: "" or the error
	dest     string
}

// parser is one argparse (sub)parser: its prog, flags and groups.
type parser struct {
	prog      string
	flags     []*flag
	exclusive [][]string // mutually exclusive groups
	oneOf     [][]string // mutually exclusive groups with required=True
}

type parsed struct {
	values map[string][]string
	set    map[string]bool
}

func (p parsed) str(name string) string {
	if v := p.values[name]; len(v) > 0 {
		return v[len(v)-1]
	}
	return ""
}

// usageError is what argparse prints before exiting 2.
type usageError struct{ usage, msg string }

func (p *parser) usage() string {
	var b strings.Builder
	b.WriteString("usage: " + p.prog + " [-h]")
	for _, f := range p.flags {
		meta := strings.ToUpper(strings.ReplaceAll(strings.TrimPrefix(f.name, "--"), "-", "_"))
		switch f.kind {
		case kTrue:
			meta = ""
		case kOptional:
			meta = ""
			f := f
			b.WriteString(" [" + f.name + " | --no-" + strings.TrimPrefix(f.name, "--") + "]")
			continue
		}
		if len(f.choices) > 0 {
			meta = "{" + strings.Join(f.choices, ",") + "}"
		}
		item := f.name
		if meta != "" {
			item += " " + meta
		}
		if f.required {
			b.WriteString(" " + item)
		} else {
			b.WriteString(" [" + item + "]")
		}
	}
	return b.String()
}

func (p *parser) fail(format string, args ...any) *usageError {
	return &usageError{usage: p.usage(), msg: p.prog + ": error: " + fmt.Sprintf(format, args...)}
}

// lookup finds a flag by its name or, as argparse allows, a unique prefix.
func (p *parser) lookup(name string) (*flag, []string) {
	var matches []*flag
	for _, f := range p.flags {
		names := []string{f.name}
		if f.kind == kOptional {
			names = append(names, "--no-"+strings.TrimPrefix(f.name, "--"))
		}
		if f.short != "" {
			names = append(names, f.short)
		}
		for _, n := range names {
			if n == name {
				return f, nil
			}
			if strings.HasPrefix(n, name) && strings.HasPrefix(name, "--") {
				matches = append(matches, f)
			}
		}
	}
	if len(matches) == 1 {
		return matches[0], nil
	}
	var names []string
	for _, m := range matches {
		names = append(names, m.name)
	}
	return nil, names
}

// parse reads args; unrecognized ones are returned for the top-level
// parser to report, as argparse does.
func (p *parser) parse(args []string) (parsed, []string, *usageError) {
	out := parsed{values: map[string][]string{}, set: map[string]bool{}}
	var unknown []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-h" || a == "--help" {
			return out, nil, &usageError{usage: p.usage(), msg: ""}
		}
		if !strings.HasPrefix(a, "-") {
			unknown = append(unknown, a)
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		f, ambiguous := p.lookup(name)
		if len(ambiguous) > 1 {
			return out, nil, p.fail("ambiguous option: %s could match %s", name, strings.Join(ambiguous, ", "))
		}
		if f == nil {
			unknown = append(unknown, a)
			continue
		}
		switch f.kind {
		case kTrue, kOptional:
			if hasVal {
				return out, nil, p.fail("argument %s: ignored explicit argument '%s'", f.name, val)
			}
			out.set[f.name] = !strings.HasPrefix(name, "--no-")
			continue
		}
		if !hasVal {
			if i+1 >= len(args) || (strings.HasPrefix(args[i+1], "-") && len(args[i+1]) > 1) {
				return out, nil, p.fail("argument %s: expected one argument", f.name)
			}
			i++
			val = args[i]
		}
		if f.kind == kInt {
			if _, err := strconv.Atoi(strings.TrimSpace(val)); err != nil {
				return out, nil, p.fail("argument %s: invalid int value: '%s'", f.name, val)
			}
		}
		if f.check != nil {
			if msg := f.check(val); msg != "" {
				return out, nil, p.fail("argument %s: %s", f.name, msg)
			}
		}
		if len(f.choices) > 0 && !slices.Contains(f.choices, val) {
			quoted := make([]string, len(f.choices))
			for i, c := range f.choices {
				quoted[i] = "'" + c + "'"
			}
			return out, nil, p.fail("argument %s: invalid choice: '%s' (choose from %s)", f.name, val, strings.Join(quoted, ", "))
		}
		out.set[f.name] = true
		if f.kind == kAppend {
			out.values[f.name] = append(out.values[f.name], val)
		} else {
			out.values[f.name] = []string{val}
		}
	}
	for _, g := range append(slices.Clone(p.exclusive), p.oneOf...) {
		var seen []string
		for _, n := range g {
			if _, ok := out.values[n]; ok {
				seen = append(seen, n)
			}
		}
		if len(seen) > 1 {
			return out, nil, p.fail("argument %s: not allowed with argument %s", seen[1], seen[0])
		}
	}
	var missing []string
	for _, f := range p.flags {
		if _, ok := out.values[f.name]; f.required && !ok {
			missing = append(missing, f.name)
		}
	}
	if len(missing) > 0 {
		return out, nil, p.fail("the following arguments are required: %s", strings.Join(missing, ", "))
	}
	for _, g := range p.oneOf {
		found := false
		for _, n := range g {
			if _, ok := out.values[n]; ok {
				found = true
			}
		}
		if !found {
			return out, nil, p.fail("one of the arguments %s is required", strings.Join(g, " "))
		}
	}
	return out, unknown, nil
}

var workloadPattern = regexp.MustCompile(`^[a-z]([-a-z0-9]*[a-z0-9])?$`)

// workloadNameType is xpk's workload_name_type.
func workloadNameType(v string) string {
	if !workloadPattern.MatchString(v) || len(v) > 40 {
		return "Workload name must be less than 40 characters and match the pattern `[a-z]([-a-z0-9]*[a-z0-9])?` Name is currently " + v
	}
	return ""
}

var statusFilters = []string{"EVERYTHING", "FINISHED", "RUNNING", "QUEUED", "FAILED", "SUCCESSFUL"}

// shared is xpk's add_shared_arguments.
func shared() []*flag {
	return []*flag{
		{name: "--project"}, {name: "--zone"},
		{name: "--dry-run", kind: kOptional}, {name: "--skip-validation", kind: kOptional}, {name: "--quiet", kind: kOptional},
	}
}

func createParser() *parser {
	fs := []*flag{
		{name: "--command", required: true},
		{name: "--tpu-type"}, {name: "--device-type"},
		{name: "--num-nodes", kind: kInt},
		{name: "--scheduler"}, {name: "--debug-dump-gcs"},
		{name: "--deploy-stacktrace-sidecar", kind: kTrue}, {name: "--use-pathways", kind: kTrue},
		{name: "--on-demand", kind: kTrue}, {name: "--reservation"}, {name: "--spot", kind: kTrue},
		{name: "--workload", required: true, check: workloadNameType}, {name: "--cluster", required: true},
	}
	fs = append(fs, shared()...)
	fs = append(fs,
		&flag{name: "--docker-name"}, &flag{name: "--num-slices", kind: kInt},
		&flag{name: "--priority", choices: []string{"very-low", "low", "medium", "high", "very-high"}},
		&flag{name: "--max-restarts"}, &flag{name: "--ttl-seconds-after-finished", kind: kInt},
		&flag{name: "--termination-grace-period-seconds", short: "-tgps"},
		&flag{name: "--enable-debug-logs", kind: kTrue}, &flag{name: "--restart-on-user-code-failure", kind: kTrue},
		&flag{name: "--ramdisk-directory"}, &flag{name: "--mtc_enabled", kind: kTrue},
		&flag{name: "--env-file"}, &flag{name: "--env", kind: kAppend},
		&flag{name: "--base-docker-image"}, &flag{name: "--script-dir"}, &flag{name: "--docker-image"},
		&flag{name: "--use-vertex-tensorboard", kind: kTrue}, &flag{name: "--experiment-name"},
		// Design 001's namespace; upstream xpk has no such flag.
		&flag{name: "--namespace"},
	)
	return &parser{prog: "xpk workload create", flags: fs,
		oneOf: [][]string{{"--tpu-type", "--device-type"}}, exclusive: [][]string{{"--env-file", "--env"}}}
}

func listParser() *parser {
	fs := []*flag{
		{name: "--cluster", required: true},
		{name: "--filter-by-status", choices: statusFilters},
		{name: "--filter-by-job"},
		{name: "--wait-for-job-completion"}, {name: "--timeout", kind: kInt},
	}
	return &parser{prog: "xpk workload list", flags: append(fs, shared()...)}
}

func deleteParser() *parser {
	fs := append(shared(), &flag{name: "--cluster", required: true},
		&flag{name: "--workload", check: workloadNameType}, &flag{name: "--filter-by-job"},
		&flag{name: "--filter-by-status", choices: statusFilters}, &flag{name: "--force", kind: kTrue})
	return &parser{prog: "xpk workload delete", flags: fs}
}

const topUsage = "usage: xpk [-h] {workload,cluster,inspector,info,storage,config,version} ..."

// route picks the subcommand's parser as xpk's nested subparsers do.
func route(args []string) (*parser, string, []string, *usageError) {
	if len(args) == 0 {
		return nil, "", nil, &usageError{usage: topUsage, msg: "xpk: error: the following arguments are required: xpk_subcommands"}
	}
	if args[0] != "workload" {
		return nil, "", nil, &usageError{usage: topUsage, msg: fmt.Sprintf("xpk: error: argument xpk_subcommands: invalid choice: '%s' (choose from 'workload', 'cluster', 'inspector', 'info', 'storage', 'config', 'version')", args[0])}
	}
	if len(args) < 2 {
		return nil, "", nil, &usageError{usage: "usage: xpk workload [-h] {create,create-pathways,delete,list} ...", msg: "xpk workload: error: the following arguments are required: xpk_workload_subcommands"}
	}
	switch args[1] {
	case "create":
		return createParser(), "create", args[2:], nil
	case "list":
		return listParser(), "list", args[2:], nil
	case "delete":
		return deleteParser(), "delete", args[2:], nil
	}
	return nil, "", nil, &usageError{usage: "usage: xpk workload [-h] {create,create-pathways,delete,list} ...",
		msg: fmt.Sprintf("xpk workload: error: argument xpk_workload_subcommands: invalid choice: '%s' (choose from 'create', 'create-pathways', 'delete', 'list')", args[1])}
}
