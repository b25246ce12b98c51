package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/apparentlymart/go-textseg/v15/textseg"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// MaxFileSize is the most electd reads of one configuration file (and of
// `electd fmt`'s standard input).
const MaxFileSize = 4 << 20

// Limits on what Load reads. Configuration is written by people or
// generated from a template; these are far above either (a job block is
// about 100 bytes, and nesting beyond 10 is rare), and low enough that a
// wrong path, a binary or a hostile file gets one diagnostic instead of a
// hang, an out-of-memory kill or a stack overflow.
const (
	// maxFileSize bounds one file: 40,000 generated job blocks fit.
	maxFileSize = MaxFileSize
	// maxTotalSize bounds all the files of one Load.
	maxTotalSize = 16 << 20
	// maxNesting bounds how deep hcl's parsers and evaluators recurse (see
	// nesting). A Go stack overflow is fatal, not a panic Load could
	// recover, so a file nested deeper is refused before it is parsed.
	maxNesting = 64
)

var errTooLarge = errors.New("too large")

// notRegularError is a path that is not a regular file.
type notRegularError struct {
	name string
	mode fs.FileMode
}

func (e *notRegularError) Error() string {
	kind := "not a regular file"
	switch {
	case e.mode&fs.ModeNamedPipe != 0:
		kind = "a named pipe (FIFO)"
	case e.mode&fs.ModeSocket != 0:
		kind = "a socket"
	case e.mode&fs.ModeDevice != 0:
		kind = "a device"
	case e.mode.IsDir():
		kind = "a directory"
	}
	return fmt.Sprintf("%s is %s, not a regular file", e.name, kind)
}

// readRegular reads the regular file name, at most limit bytes. It never
// opens anything else: opening a FIFO for reading blocks until a writer
// comes, and a device can be endless (/dev/zero) or have side effects.
func readRegular(name string, limit int64) ([]byte, error) {
	info, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &notRegularError{name, info.Mode()}
	}
	// The path may have been swapped for a FIFO since the Stat: O_NONBLOCK
	// keeps the open from blocking, and the Stat of the open file decides.
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err = f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, &notRegularError{name, info.Mode()}
	}
	if info.Size() > limit {
		return nil, errTooLarge
	}
	// The size can be wrong (files in /proc say 0) or grow while we read.
	src, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(src)) > limit {
		return nil, errTooLarge
	}
	return src, nil
}

// readFile reads one configuration file within the limits and checks that
// it is text nested no deeper than maxNesting. A file it refuses is
// recorded in the parser unparsed, so its diagnostic can show the line.
func (l *loader) readFile(name string) ([]byte, hcl.Diagnostics) {
	limit := min(maxFileSize, maxTotalSize-l.read)
	src, err := readRegular(name, limit)
	if err != nil {
		return nil, readDiags(name, err, limit < maxFileSize)
	}
	l.read += int64(len(src))
	if diags := checkText(name, src); diags.HasErrors() {
		// The line up to the bad byte, not the binary after it.
		l.parser.AddFile(name, &hcl.File{Bytes: src[:diags[0].Subject.End.Byte]})
		return nil, diags
	}
	if diags := checkNesting(name, src); diags.HasErrors() {
		l.parser.AddFile(name, &hcl.File{Bytes: src})
		return nil, diags
	}
	return src, nil
}

func readDiags(name string, err error, overTotal bool) hcl.Diagnostics {
	var nr *notRegularError
	var pe *fs.PathError
	switch {
	case errors.As(err, &nr):
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Not a regular file",
			Detail:   fmt.Sprintf("%s. electd reads its configuration only from regular files (a symbolic link to one is fine).", nr),
		}}
	case errors.Is(err, errTooLarge) && overTotal:
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Configuration too large",
			Detail:   fmt.Sprintf("The configuration files together are larger than %d MiB, the most electd reads; %s was not read. Is a directory of something else among the paths?", maxTotalSize>>20, name),
		}}
	case errors.Is(err, errTooLarge):
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "File too large",
			Detail:   fmt.Sprintf("%s is larger than %d MiB, the most electd reads from one configuration file. Is it the right file?", name, maxFileSize>>20),
		}}
	case errors.As(err, &pe):
		err = fmt.Errorf("%s: %v", name, pe.Err)
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Cannot read configuration",
		Detail:   err.Error() + ".",
	}}
}

// checkText refuses a file that is not UTF-8 text. Without it a binary
// file gives one lexer error per byte, each with a line of garbage.
func checkText(name string, src []byte) hcl.Diagnostics {
	for i := 0; i < len(src); {
		r, size := utf8.DecodeRune(src[i:])
		what := ""
		switch {
		case r == 0:
			what = "a NUL byte"
		case r == utf8.RuneError && size == 1:
			what = fmt.Sprintf("the byte 0x%02x (not UTF-8)", src[i])
		}
		if what != "" {
			at := posAt(src, i)
			return hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Not a text file",
				Detail:   fmt.Sprintf("%s has %s at line %d, column %d: configuration files are UTF-8 text. Is it the right file?", name, what, at.Line, at.Column),
				Subject:  byteRange(name, src, i, i+1).Ptr(),
			}}
		}
		i += size
	}
	return nil
}

// checkNesting refuses a file nested deeper than maxNesting.
func checkNesting(name string, src []byte) hcl.Diagnostics {
	var subject hcl.Range
	if strings.HasSuffix(name, ".json") {
		at := jsonTooDeep(src, maxNesting)
		if at < 0 {
			return nil
		}
		subject = byteRange(name, src, at, at+1)
	} else {
		toks, _ := hclsyntax.LexConfig(src, name, hcl.InitialPos)
		i := tooDeep(toks, true, 0, maxNesting)
		if i < 0 {
			return nil
		}
		subject = toks[i].Range
	}
	return hcl.Diagnostics{{
		Severity: hcl.DiagError,
		Summary:  "Nesting too deep",
		Detail:   fmt.Sprintf("Blocks, brackets, templates and chains of operators nest more than %d deep here, deeper than electd reads. Split the expression up.", maxNesting),
		Subject:  &subject,
	}}
}

// posAt is the position of src[off].
func posAt(src []byte, off int) hcl.Pos {
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	return hcl.Pos{
		Line:   bytes.Count(src[:start], []byte{'\n'}) + 1,
		Column: utf8.RuneCount(src[start:off]) + 1,
		Byte:   off,
	}
}

func byteRange(name string, src []byte, from, to int) hcl.Range {
	return hcl.Range{Filename: name, Start: posAt(src, from), End: posAt(src, to)}
}

// tokenTemplateBlock stands for the body of a template %{if} or %{for},
// which the template parser reads recursively. hclsyntax uses no negative
// token types.
const tokenTemplateBlock hclsyntax.TokenType = -1

// nesting measures how deep hclsyntax recurses on a token stream, which is
// the depth of the syntax tree it builds: each open brace, bracket, paren,
// quote, heredoc, interpolation and template directive is one level, and so
// is each operator or index in a chain (a+b+c is a tree as deep as it is
// long, and evaluating it recurses as deep). It counts more than the
// parser recurses, never less: an unmatched closer is ignored, and a chain
// only ends at a comma or at a newline where newlines end expressions.
type nesting struct {
	levels []level
	depth  int                 // levels below the first plus every chain length
	last   hclsyntax.TokenType // the last token the parser does not skip
}

type level struct {
	open      hclsyntax.TokenType
	chain     int    // operators and indexes since the last comma or newline
	lines     bool   // a newline ends an expression here (bodies, objects)
	directive string // the keyword of a template directive: if, for, endif...
}

// tooDeep returns the index of the token at which toks nest deeper than
// limit, counting from depth base, or -1. body says whether toks are a
// body, where newlines end expressions, or an expression or template.
func tooDeep(toks hclsyntax.Tokens, body bool, base, limit int) int {
	n := nesting{levels: []level{{lines: body}}, depth: base}
	for i, t := range toks {
		n.token(toks, i)
		if n.depth > limit {
			return i
		}
		if t.Type != hclsyntax.TokenNewline && t.Type != hclsyntax.TokenComment {
			n.last = t.Type
		}
	}
	return -1
}

func (n *nesting) top() *level { return &n.levels[len(n.levels)-1] }

func (n *nesting) push(l level) {
	n.levels = append(n.levels, l)
	n.depth++
}

// pop closes the top level if it was opened by open. The first level,
// the file's body, is never closed.
func (n *nesting) pop(open hclsyntax.TokenType) {
	if t := n.top(); len(n.levels) > 1 && t.open == open {
		n.depth -= 1 + t.chain
		n.levels = n.levels[:len(n.levels)-1]
	}
}

func (n *nesting) chain() {
	n.top().chain++
	n.depth++
}

func (n *nesting) endChain() {
	n.depth -= n.top().chain
	n.top().chain = 0
}

func (n *nesting) token(toks hclsyntax.Tokens, i int) {
	switch t := toks[i]; t.Type {
	case hclsyntax.TokenOBrack:
		if !n.operandNext() {
			n.chain() // a[x][y] nests like an operator chain
		}
		n.push(level{open: t.Type})
	case hclsyntax.TokenOBrace:
		n.push(level{open: t.Type, lines: !startsFor(toks[i+1:])})
	case hclsyntax.TokenOParen, hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc, hclsyntax.TokenTemplateInterp:
		n.push(level{open: t.Type})
	case hclsyntax.TokenTemplateControl:
		l := level{open: t.Type}
		if i+1 < len(toks) && toks[i+1].Type == hclsyntax.TokenIdent {
			l.directive = string(toks[i+1].Bytes)
		}
		n.push(l)
	case hclsyntax.TokenCBrace:
		n.pop(hclsyntax.TokenOBrace)
	case hclsyntax.TokenCBrack:
		n.pop(hclsyntax.TokenOBrack)
	case hclsyntax.TokenCParen:
		n.pop(hclsyntax.TokenOParen)
	case hclsyntax.TokenCQuote:
		n.endTemplate(hclsyntax.TokenOQuote)
	case hclsyntax.TokenCHeredoc:
		n.endTemplate(hclsyntax.TokenOHeredoc)
	case hclsyntax.TokenTemplateSeqEnd:
		n.endSequence()
	case hclsyntax.TokenComma:
		n.endChain()
	case hclsyntax.TokenNewline:
		if n.top().lines {
			n.endChain()
		}
	case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash,
		hclsyntax.TokenPercent, hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual,
		hclsyntax.TokenLessThan, hclsyntax.TokenLessThanEq, hclsyntax.TokenGreaterThan,
		hclsyntax.TokenGreaterThanEq, hclsyntax.TokenAnd, hclsyntax.TokenOr,
		hclsyntax.TokenBang, hclsyntax.TokenQuestion:
		n.chain()
	}
}

// operandNext reports whether an expression starts after the last token,
// so that a bracket there opens a tuple. Anywhere else it is an index or
// a splat, which the parser chains (and, in its error recovery, after
// anything at all: a.[*].[*]).
func (n *nesting) operandNext() bool {
	switch n.last {
	case hclsyntax.TokenNil, hclsyntax.TokenEqual, hclsyntax.TokenComma, hclsyntax.TokenColon,
		hclsyntax.TokenQuestion, hclsyntax.TokenFatArrow, hclsyntax.TokenOParen,
		hclsyntax.TokenOBrack, hclsyntax.TokenOBrace, hclsyntax.TokenTemplateInterp,
		hclsyntax.TokenTemplateControl:
		return true
	}
	return false
}

// endTemplate closes a quoted string or a heredoc, and any %{if} or %{for}
// left open in it: the template parser stops at its end.
func (n *nesting) endTemplate(open hclsyntax.TokenType) {
	for n.top().open == tokenTemplateBlock {
		n.pop(tokenTemplateBlock)
	}
	n.pop(open)
}

// endSequence is the } of ${...} or %{...}. After %{if} or %{for} the
// template parser reads the directive's body one level deeper, up to its
// %{endif} or %{endfor}.
func (n *nesting) endSequence() {
	t := n.top()
	if t.open == hclsyntax.TokenTemplateInterp {
		n.pop(t.open)
		return
	}
	if t.open != hclsyntax.TokenTemplateControl {
		return
	}
	directive := t.directive
	n.pop(t.open)
	switch directive {
	case "if", "for":
		n.push(level{open: tokenTemplateBlock})
	case "endif", "endfor":
		n.pop(tokenTemplateBlock)
	}
}

// startsFor reports whether toks, after newlines and comments, start with
// "for": then a brace opens a for expression, where newlines do not end
// the expression.
func startsFor(toks hclsyntax.Tokens) bool {
	for _, t := range toks {
		if t.Type != hclsyntax.TokenNewline && t.Type != hclsyntax.TokenComment {
			return t.Type == hclsyntax.TokenIdent && string(t.Bytes) == "for"
		}
	}
	return false
}

// jsonTooDeep returns the offset at which src, JSON, nests deeper than
// limit, or -1. hcl's JSON parser recurses on arrays and objects, and each
// string is parsed later as a template (or an expression) from that depth.
// Strings end where hcl's JSON scanner ends them. As in tooDeep, a closer
// that does not match is ignored: the parser skips it in its recovery.
func jsonTooDeep(src []byte, limit int) int {
	var open []byte
	for i := 0; i < len(src); {
		switch c := src[i]; c {
		case '{', '[':
			open = append(open, c)
			if len(open) > limit {
				return i
			}
			i++
		case '}', ']':
			if len(open) > 0 && open[len(open)-1] == c-2 { // '{'+2 == '}', '['+2 == ']'
				open = open[:len(open)-1]
			}
			i++
		case '"':
			end := jsonStringEnd(src, i)
			if stringTooDeep(src[i:end], len(open), limit) {
				return i
			}
			i = end
		default:
			i++
		}
	}
	return -1
}

// jsonStringEnd is the end of the string token starting at src[start],
// found as hcl's JSON scanner finds it: escapes toggle, a control byte
// ends an unterminated string, and other text advances by grapheme
// clusters (which can take in a quote or a backslash).
func jsonStringEnd(src []byte, start int) int {
	i := start + 1
	escaping := false
	for i < len(src) {
		switch b := src[i]; {
		case b == '\\':
			escaping = !escaping
			i++
		case b == '"':
			i++
			if !escaping {
				return i
			}
			escaping = false
		case b < 32:
			return i
		default:
			advance, _, _ := textseg.ScanGraphemeClusters(src[i:], true)
			i += max(advance, 1)
			escaping = false
		}
	}
	return i
}

// stringTooDeep reports whether the JSON string token tok, at JSON depth
// depth, nests deeper than limit when hcl parses its value as a template
// or as an expression.
func stringTooDeep(tok []byte, depth, limit int) bool {
	var s string
	if json.Unmarshal(tok, &s) != nil {
		return false // hcl reports the string and never parses its value
	}
	tmpl, _ := hclsyntax.LexTemplate([]byte(s), "", hcl.InitialPos)
	expr, _ := hclsyntax.LexExpression([]byte(s), "", hcl.InitialPos)
	return tooDeep(tmpl, false, depth, limit) >= 0 || tooDeep(expr, false, depth, limit) >= 0
}

// parseFile reads and parses one configuration file, by its name's
// suffix as HCL or JSON.
func (l *loader) parseFile(name string) (*hcl.File, hcl.Diagnostics) {
	src, diags := l.readFile(name)
	if diags.HasErrors() {
		return nil, diags
	}
	if strings.HasSuffix(name, ".json") {
		return l.parser.ParseJSON(src, name)
	}
	return l.parser.ParseHCL(src, name)
}

// ReadSource reads one configuration file with Load's guards (a regular
// text file of bounded size and nesting), for tools that parse it
// themselves, such as `electd fmt`. The diagnostics carry no source.
func ReadSource(name string) ([]byte, hcl.Diagnostics) {
	src, err := readRegular(name, maxFileSize)
	if err != nil {
		return nil, readDiags(name, err, false)
	}
	return src, CheckSource(name, src)
}

// CheckSource applies the text and nesting guards of Load to src (standard
// input, for `electd fmt -`): hcl's parser recurses, and a deep enough
// input would overflow the stack.
func CheckSource(name string, src []byte) hcl.Diagnostics {
	if diags := checkText(name, src); diags.HasErrors() {
		return diags
	}
	return checkNesting(name, src)
}
