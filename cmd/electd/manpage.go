package main

// The man page and the shell completions are written from the table of
// commands (commands.go) by two hidden commands that the build runs (`make
// install`, `make deb`), as `electd -h` and each command's -h are: none of
// them can drift from another.

import (
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// helpEntry is one listed command, with its flags as -h prints them.
type helpEntry struct {
	cmdSpec
	flags []flagHelp
}

// flagHelp is one flag as -h prints it.
type flagHelp struct {
	name       string
	arg        string // the value's name in the help ("PATH", "duration"); "" for a boolean flag
	usage      string
	def        string // "" when -h shows no default
	repeatable bool
}

// takesPath: the flag's value is a file or a directory, for completion.
func (f flagHelp) takesPath() bool { return f.arg == "PATH" || f.arg == "FILE" || f.arg == "DIR" }

// helpTable is the commands `electd -h` lists, in its order, each with its
// flags as its -h prints them.
func helpTable() []helpEntry {
	var table []helpEntry
	for _, s := range commands() {
		if !s.hidden {
			table = append(table, helpEntry{cmdSpec: s, flags: flagsOf(newCommandFrom(s))})
		}
	}
	return table
}

// flagsOf lists a command's flags as PrintDefaults does: sorted, with the
// value's name taken from the usage's `backquotes`, and the default unless
// it is the zero value.
func flagsOf(c *command) []flagHelp {
	var out []flagHelp
	c.VisitAll(func(f *flag.Flag) {
		arg, text := flag.UnquoteUsage(f)
		h := flagHelp{name: f.Name, arg: arg, usage: text}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			h.arg = ""
		}
		switch f.DefValue {
		case "", "false", "0", "0s", "[]":
		default:
			h.def = f.DefValue
			if fmt.Sprintf("%T", f.Value) == "*flag.stringValue" {
				h.def = strconv.Quote(f.DefValue)
			}
		}
		_, h.repeatable = f.Value.(*stringList)
		out = append(out, h)
	})
	return out
}

// cmdMan is `electd man`: electd(1) in roff, on stdout.
func cmdMan(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("man")
	docdir := fs.stringFlag("docdir")
	if _, exit, ok := fs.parse(args, stdout, stderr); !ok {
		return exit
	}
	// The defaults the page shows are the built-in ones, not this shell's.
	os.Unsetenv(envAddr)
	table := helpTable()
	date := time.Now().UTC()
	// Reproducible builds: the date of the source, not of the build.
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			fmt.Fprintf(stderr, "electd man: SOURCE_DATE_EPOCH %q is not a number of seconds\n", s)
			return 1
		}
		date = time.Unix(sec, 0).UTC()
	}
	io.WriteString(stdout, manPage(table, *docdir, date))
	return 0
}

// cmdCompletion is `electd completion SHELL`: a completion script on stdout.
func cmdCompletion(args []string, stdout, stderr io.Writer) int {
	fs := newCommand("completion")
	pos, exit, ok := fs.parse(args, stdout, stderr)
	if !ok {
		return exit
	}
	table := helpTable()
	switch pos[0] {
	case "bash":
		io.WriteString(stdout, bashCompletion(table))
	case "zsh":
		io.WriteString(stdout, zshCompletion(table))
	default:
		fmt.Fprintf(stderr, "electd completion: unknown shell %q: bash or zsh\n\n", pos[0])
		fs.usage(stderr)
		return 2
	}
	return 0
}

func manPage(table []helpEntry, docdir string, date time.Time) string {
	var b strings.Builder
	p := func(lines ...string) {
		for _, l := range lines {
			b.WriteString(l)
			b.WriteByte('\n')
		}
	}
	p(`.\" Written by "electd man" from the help of each command: do not edit.`,
		fmt.Sprintf(`.TH ELECTD 1 "%s" %s "User Commands"`, date.Format("2006-01-02"), roffQuote("electd "+releaseVersion())),
		".nh", // no hyphenation: flag and command names are typed as printed
		".SH NAME",
		`electd \- leader\-election agent: run a job on exactly one of N nodes`,
		".SH SYNOPSIS",
		usageLine(synopsis),
		".SH DESCRIPTION",
		"electd runs one election loop per job declared in HCL configuration files.",
		"Every node runs",
		`\fBelectd run\fR`,
		"with the same files; a lease in a shared store decides which node leads each job.",
		"The leader supervises the job's command or runs its scheduled task,",
		"and commands and webhooks fire when leadership moves.",
		".PP",
		"Flags may come before or after the arguments;",
		`an argument \fB\-\-\fR ends the flags.`,
		roffText(moreHelp),
		"Bad usage exits with status 2, after printing the problem and the usage on standard error.",
		".SH COMMANDS")
	for _, e := range table {
		p(".SS "+roffQuote(e.line()), roffParagraphs(e.about))
		for _, f := range e.flags {
			head := `\fB\-` + roffText(f.name) + `\fR`
			if f.arg != "" {
				head += ` \fI` + roffText(f.arg) + `\fR`
			}
			text := f.usage
			if f.def != "" {
				text += " (default " + f.def + ")"
			}
			p(".TP", head, roffText(text))
		}
	}
	p(".SH EXIT STATUS",
		".TP", "0", "Success: the agent stopped cleanly, the configuration is valid (warnings allowed), the agent answered.",
		".TP", "1", "The command failed: an invalid configuration, refused file permissions, an agent or store that could not be reached or refused.",
		".TP", "2", "Bad usage.",
		".PP", "A command whose help above lists statuses of its own exits with those.",
		".SH ENVIRONMENT",
		".TP", `\fB`+envAddr+`\fR`, roffText("The agent's API address, the default of -addr."),
		".TP", `\fB`+envToken+`\fR`, roffText("The agent's api_token, the default of -token."),
		".PP", roffText("The commands electd starts get ELECTD_JOB, ELECTD_NODE, ELECTD_TOKEN and the other variables described in configuration.md."),
		".SH FILES",
		".TP", `\fI/etc/electd/\fR`, roffText("The configuration: every *.hcl and *.hcl.json file of the directory, the default of -config."),
		".TP", `\fI/etc/default/electd\fR`, roffText("Environment variables of the systemd unit electd.service, read with env() in the configuration: keep secrets there, mode 0600."),
		".TP", `\fI/var/lib/electd/\fR`, roffText("The state directory and working directory of the service, where the embedded SQLite default keeps electd.db."),
		".TP", `\fI`+roffText(strings.TrimSuffix(docdir, "/"))+`/\fR`, roffText("The documentation: README.md, docs/ (operations.md, configuration.md, cli.md, ...) and examples/, one configuration per store."),
		".SH SEE ALSO",
		`.BR systemctl (1),`,
		`.BR journalctl (1),`,
		`.BR systemd.service (5)`)
	return b.String()
}

// roffText escapes one line of text for roff: backslashes, hyphens (a
// minus sign, as typed), a leading control character, and `code` in bold.
func roffText(s string) string {
	s = strings.ReplaceAll(s, `\`, `\e`)
	s = strings.ReplaceAll(s, "-", `\-`)
	s = backquoted.ReplaceAllString(s, `\fB$1\fR`)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}

var backquoted = regexp.MustCompile("`([^`]+)`")

// roffQuote is s as one quoted macro argument.
func roffQuote(s string) string {
	return `"` + strings.ReplaceAll(roffText(s), `"`, `\(dq`) + `"`
}

// usageLine sets a usage line: what is typed in bold, what stands for a
// value in italics.
func usageLine(s string) string {
	s = roffText(s)
	s = placeholder.ReplaceAllString(s, `\fI$0\fR`)
	return `\fB` + strings.Replace(s, " ", `\fR `, 1)
}

var placeholder = regexp.MustCompile(`<[a-z]+>|\b[A-Z][A-Z_]+\b|\bflags\b|\barguments\b`)

// roffParagraphs sets a command's text: paragraphs apart, indented lines
// (examples, lists) as they are.
func roffParagraphs(text string) string {
	var b strings.Builder
	for i, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		if i > 0 {
			b.WriteString(".PP\n")
		}
		verbatim := false
		for _, line := range strings.Split(para, "\n") {
			indented := strings.HasPrefix(line, " ")
			if indented != verbatim {
				if indented {
					b.WriteString(".RS 4\n.nf\n")
				} else {
					b.WriteString(".fi\n.RE\n")
				}
				verbatim = indented
			}
			b.WriteString(roffText(strings.TrimSpace(line)) + "\n")
		}
		if verbatim {
			b.WriteString(".fi\n.RE\n")
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func bashCompletion(table []helpEntry) string {
	var b strings.Builder
	var names []string
	for _, e := range table {
		names = append(names, e.name)
	}
	fmt.Fprintf(&b, `# bash completion for electd(1). Written by "electd completion bash" from
# the help of each command: do not edit.
_electd() {
	local cur=${COMP_WORDS[COMP_CWORD]} prev=${COMP_WORDS[COMP_CWORD-1]}
	local flags valued paths operands i
	COMPREPLY=()
	if [ "$COMP_CWORD" -eq 1 ]; then
		COMPREPLY=($(compgen -W '%s help' -- "$cur"))
		return
	fi
	case ${COMP_WORDS[1]} in
`, strings.Join(names, " "))
	for _, e := range table {
		flags := []string{"-h"}
		var valued, paths []string
		for _, f := range e.flags {
			flags = append(flags, "-"+f.name)
			if f.arg != "" {
				valued = append(valued, "-"+f.name, "--"+f.name)
			}
			if f.takesPath() {
				paths = append(paths, "-"+f.name, "--"+f.name)
			}
		}
		operands := map[operandKind]string{completePaths: "path", completeCommand: "command"}[e.complete]
		fmt.Fprintf(&b, "\t%s) flags='%s' valued='%s' paths='%s' operands='%s' ;;\n",
			e.name, strings.Join(flags, " "), strings.Join(valued, " "), strings.Join(paths, " "), operands)
	}
	b.WriteString(`	*) return ;;
	esac
	# After --: the command line of electd lock, or arguments.
	for ((i = 2; i < COMP_CWORD; i++)); do
		if [ "${COMP_WORDS[i]}" = -- ]; then
			if [ "$operands" = command ] && [ $((i + 1)) -eq "$COMP_CWORD" ]; then
				COMPREPLY=($(compgen -c -- "$cur"))
			else
				COMPREPLY=($(compgen -f -- "$cur"))
			fi
			return
		fi
	done
	case " $valued " in
	*" $prev "*)
		case " $paths " in
		*" $prev "*) COMPREPLY=($(compgen -f -- "$cur")) ;;
		esac
		return
		;;
	esac
	if [[ $cur == -* ]]; then
		COMPREPLY=($(compgen -W "$flags" -- "$cur"))
	elif [ "$operands" = path ]; then
		COMPREPLY=($(compgen -f -- "$cur"))
	fi
}
complete -o filenames -F _electd electd
`)
	return b.String()
}

func zshCompletion(table []helpEntry) string {
	var b strings.Builder
	b.WriteString(`#compdef electd
# zsh completion for electd(1). Written by "electd completion zsh" from the
# help of each command: do not edit.

_electd() {
	# Not "commands": that is zsh's table of the commands on PATH.
	local -a subcommands
	subcommands=(
`)
	for _, e := range table {
		fmt.Fprintf(&b, "\t\t%s\n", zshQuote(e.name+":"+strings.ReplaceAll(e.summary, ":", `\:`)))
	}
	b.WriteString(`	)
	if (( CURRENT == 2 )); then
		_describe -t commands 'electd command' subcommands
		return
	fi
	local cmd=$words[2]
	shift words
	(( CURRENT-- ))
	case $cmd in
`)
	for _, e := range table {
		fmt.Fprintf(&b, "\t(%s)\n", e.name)
		if e.complete == completeCommand {
			// After --, the command line completes as on its own.
			b.WriteString("\t\tlocal i=${words[(i)--]}\n\t\tif (( i < CURRENT )); then\n" +
				"\t\t\tshift $i words\n\t\t\t(( CURRENT -= i ))\n\t\t\t_normal\n\t\t\treturn\n\t\tfi\n")
		}
		b.WriteString("\t\t_arguments -S \\\n\t\t\t'(- *)-h[show the usage of the command]'")
		for _, f := range e.flags {
			spec := "-" + f.name + "[" + zshDescription(f.usage) + "]"
			if f.repeatable {
				spec = "*" + spec
			}
			switch {
			case f.takesPath():
				spec += ":" + f.arg + ":_files"
			case f.arg != "":
				spec += ":" + f.arg + ": "
			}
			fmt.Fprintf(&b, " \\\n\t\t\t%s", zshQuote(spec))
		}
		switch {
		case e.complete == completePaths:
			b.WriteString(" \\\n\t\t\t'*:PATH:_files'")
		case e.complete == completeCommand:
			b.WriteString(" \\\n\t\t\t'1:NAME: '")
		case e.operands != "":
			fmt.Fprintf(&b, " \\\n\t\t\t%s", zshQuote("1:"+e.operands+": "))
		}
		b.WriteString("\n\t\t;;\n")
	}
	b.WriteString(`	esac
}

_electd "$@"
`)
	return b.String()
}

// zshDescription is a flag's usage without its asides (in parentheses), up
// to its first semicolon, as an option description of _arguments.
func zshDescription(s string) string {
	s = parenthesized.ReplaceAllString(s, "")
	s, _, _ = strings.Cut(s, ";")
	s = strings.TrimSpace(s)
	r := strings.NewReplacer(`\`, `\\`, "[", `\[`, "]", `\]`, ":", `\:`)
	return r.Replace(s)
}

var parenthesized = regexp.MustCompile(`\s+\([^()]*\)`)

// zshQuote is s in single quotes.
func zshQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
