package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/electd/electd/config"
)

// command is a running command: the flags of its entry in the table
// (commands.go), parsed by the flag package, and what its -h prints. Every
// command parses its arguments through it, so all of them take flags
// before and after their positional arguments, honour "--", and refuse
// arguments they would otherwise drop silently.
type command struct {
	*flag.FlagSet
	spec cmdSpec
	vals map[string]any // the flags' values, by name: *bool, *string, ...
	vars []config.Var   // what -var and -var-file set, in the order given
}

// newCommand builds the command name of the table with its flags, ready to
// parse. The name must be in the table.
func newCommand(name string) *command {
	spec, ok := lookupCommand(name)
	if !ok {
		panic("electd: no command " + name + " in the table")
	}
	return newCommandFrom(spec)
}

func newCommandFrom(spec cmdSpec) *command {
	fs := flag.NewFlagSet(spec.name, flag.ContinueOnError)
	// parse prints errors and usage itself: help goes to stdout, errors to
	// stderr, which the flag package cannot tell apart.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	c := &command{FlagSet: fs, spec: spec, vals: map[string]any{}}
	for _, f := range spec.flags {
		c.define(f)
	}
	return c
}

// define registers f with the flag package's own values, so that -h prints
// it exactly as the flag package does.
func (c *command) define(f flagSpec) {
	var v any
	switch f.kind {
	case boolFlag:
		def, _ := f.def.(bool)
		v = c.Bool(f.name, def, f.usage)
	case stringFlag:
		def, _ := f.def.(string)
		if fn, ok := f.def.(func() string); ok {
			def = fn()
		}
		v = c.String(f.name, def, f.usage)
	case durationFlag:
		def, _ := f.def.(time.Duration)
		v = c.Duration(f.name, def, f.usage)
	case optDurationFlag:
		p := new(optionalDuration)
		c.Var(p, f.name, f.usage)
		v = p
	case pathsFlag:
		p := new(stringList)
		c.Var(p, f.name, f.usage)
		v = p
	case inputVarFlag:
		c.Func(f.name, f.usage, func(s string) error {
			v, err := config.ParseVar(s)
			if err != nil {
				return err
			}
			c.vars = append(c.vars, v)
			return nil
		})
		v = &c.vars
	case inputVarFileFlag:
		c.Func(f.name, f.usage, func(s string) error {
			c.vars = append(c.vars, config.Var{File: s})
			return nil
		})
		v = &c.vars
	default:
		panic(fmt.Sprintf("electd %s: flag -%s of an unknown kind %d", c.Name(), f.name, f.kind))
	}
	c.vals[f.name] = v
}

// flagValue is where the flag name keeps its value. A name the table does
// not give the command, or of another kind, is a mistake in the code, found
// by any run of the command (its -h included): it panics.
func flagValue[T any](c *command, name string) T {
	v, ok := c.vals[name].(T)
	if !ok {
		panic(fmt.Sprintf("electd %s: the table gives no flag -%s of type %T", c.Name(), name, v))
	}
	return v
}

func (c *command) boolFlag(name string) *bool              { return flagValue[*bool](c, name) }
func (c *command) stringFlag(name string) *string          { return flagValue[*string](c, name) }
func (c *command) durationFlag(name string) *time.Duration { return flagValue[*time.Duration](c, name) }
func (c *command) pathsFlag(name string) *stringList       { return flagValue[*stringList](c, name) }
func (c *command) optDurationFlag(name string) *optionalDuration {
	return flagValue[*optionalDuration](c, name)
}

// inputVars is what -var and -var-file set, on one list in the order
// given: a later one wins, as in Terraform.
func (c *command) inputVars() *[]config.Var { return flagValue[*[]config.Var](c, "var") }

// parse parses args and returns the positionals. ok is false when the
// command must stop with exit: 0 after -h (usage on stdout), 2 after a bad
// flag or a wrong number of positionals (the problem and usage on stderr).
func (c *command) parse(args []string, stdout, stderr io.Writer) (pos []string, exit int, ok bool) {
	flags, pos := c.split(args)
	err := c.Parse(flags)
	switch {
	case errors.Is(err, flag.ErrHelp):
		c.usage(stdout)
		return nil, 0, false
	case err == nil && len(pos) < c.spec.min:
		err = fmt.Errorf("missing %s", c.spec.operands)
	case err == nil && c.spec.max != anyNumber && len(pos) > c.spec.max:
		err = fmt.Errorf("unexpected argument %q", pos[c.spec.max])
	}
	if err != nil {
		fmt.Fprintf(stderr, "electd %s: %v\n\n", c.Name(), err)
		c.usage(stderr)
		return nil, 2, false
	}
	return pos, 0, true
}

// split separates the flags, with their values, from the positionals. Go's
// flag package stops at the first positional, but docs/cli.md writes flags after
// them (`electd step-down JOB [-addr URL]`), so this walks the whole list.
func (c *command) split(args []string) (flags, pos []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return flags, append(pos, args[i+1:]...)
		case len(a) < 2 || a[0] != '-': // "-" alone is a positional: stdin for fmt
			pos = append(pos, a)
		default:
			flags = append(flags, a)
			if c.takesValue(a) && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		}
	}
	return flags, pos
}

// takesValue reports whether the flag argument a consumes the next argument
// as its value, as the flag package will: a known non-boolean flag without
// "=". Unknown flags are left for Parse to report.
func (c *command) takesValue(a string) bool {
	name := strings.TrimPrefix(a[1:], "-")
	if strings.Contains(name, "=") {
		return false
	}
	f := c.Lookup(name)
	if f == nil {
		return false
	}
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return !ok || !b.IsBoolFlag()
}

// usage prints the usage line, what the command does, and its flags with
// their descriptions and defaults.
func (c *command) usage(w io.Writer) {
	fmt.Fprintf(w, "Usage: %s\n\n%s\n", c.spec.line(), c.spec.about)
	if len(c.spec.flags) > 0 {
		fmt.Fprint(w, "\nFlags:\n")
		c.SetOutput(w)
		c.PrintDefaults()
		c.SetOutput(io.Discard)
	}
}
