// Package skillcheck reads agent skills (skills/<name>/SKILL.md: YAML front
// matter with name and description, then Markdown whose shell code blocks
// hold the procedure) and checks every `falcon ...` command line in them
// against the real cobra command tree: the command exists, every flag
// exists on it, flag values parse, and the positional arguments are as
// many as it accepts. Placeholders (<EXP>, "$EXP", $(...)) stand for any
// value.
//
// It is pure: it parses text and walks a command tree it is given, so a
// test can hold every skill to the CLI of the same build, and a skill
// breaks the build when the CLI changes under it. Blocks whose info string
// says "main" (```sh main) are the skill's main path, which Script joins
// into one shell script for a test to run against a real server.
package skillcheck
