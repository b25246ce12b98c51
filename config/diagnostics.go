package config

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcled"
	"github.com/hashicorp/hcl/v2/hclsyntax"

	"github.com/electd/electd/internal/redact"
)

// Diagnostics are the problems Load found, with the parsed files so they can
// be shown with source snippets. A nil *Diagnostics has no problems.
type Diagnostics struct {
	diags hcl.Diagnostics
	files map[string]*hcl.File
}

// HasErrors reports whether any diagnostic is an error (warnings do not
// make a configuration invalid).
func (d *Diagnostics) HasErrors() bool { return d != nil && d.diags.HasErrors() }

// All returns every diagnostic, errors and warnings, in the order found.
func (d *Diagnostics) All() hcl.Diagnostics {
	if d == nil {
		return nil
	}
	return d.diags
}

// Errs returns the error diagnostics as errors.
func (d *Diagnostics) Errs() []error {
	if d == nil {
		return nil
	}
	return d.diags.Errs()
}

// Err is all errors joined, or nil when there are none.
func (d *Diagnostics) Err() error { return errors.Join(d.Errs()...) }

// Len is the number of diagnostics.
func (d *Diagnostics) Len() int { return len(d.All()) }

// Count returns the number of errors and warnings.
func (d *Diagnostics) Count() (errs, warnings int) {
	for _, x := range d.All() {
		if x.Severity == hcl.DiagError {
			errs++
		} else {
			warnings++
		}
	}
	return errs, warnings
}

// WriteText writes every diagnostic as HCL's diagnostic writer does (the
// file and line, the source lines, no color, no wrapping), except that a
// snippet is at most maxSnippetLines lines of at most maxLineWidth bytes:
// a minified or generated file must not print megabytes per problem.
func (d *Diagnostics) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	for _, x := range d.All() {
		severity := "Error"
		if x.Severity != hcl.DiagError {
			severity = "Warning"
		}
		fmt.Fprintf(bw, "%s: %s\n\n", severity, x.Summary)
		if x.Subject != nil {
			d.writeSnippet(bw, x)
		}
		if x.Detail != "" {
			fmt.Fprintf(bw, "%s\n\n", x.Detail)
		}
	}
	return bw.Flush()
}

func (d *Diagnostics) writeSnippet(w io.Writer, x *hcl.Diagnostic) {
	s := *x.Subject
	f := d.files[s.Filename]
	if f == nil || f.Bytes == nil {
		fmt.Fprintf(w, "  on %s line %d:\n  (source code not available)\n\n", s.Filename, s.Start.Line)
		return
	}
	in := ""
	if c := hcled.ContextString(f, s.Start.Byte); c != "" {
		in = ", in " + escape(c, false)
	}
	fmt.Fprintf(w, "  on %s line %d%s:\n", s.Filename, s.Start.Line, in)
	for _, l := range snippetLines(f.Bytes, s, x.Context) {
		if l.num == 0 {
			fmt.Fprintf(w, "   ...\n")
			continue
		}
		fmt.Fprintf(w, "%4d: %s\n", l.num, l.text)
	}
	fmt.Fprintln(w)
}

type snippetLine struct {
	num  int // 0 for the mark of lines left out
	text string
}

// snippetLines are the lines HCL's writer shows for a subject: those that
// overlap it, or it and its context when that is not much more. Each line
// is cut around the subject when it is long.
func snippetLines(src []byte, subject hcl.Range, context *hcl.Range) []snippetLine {
	r := subject
	if context != nil {
		if u := hcl.RangeOver(subject, *context); u.End.Line-u.Start.Line < maxSnippetLines {
			r = u
		}
	}
	start := min(max(r.Start.Byte, 0), len(src))
	end := min(max(r.End.Byte, start), len(src))
	if end == start {
		end++ // HCL's writer shows the line an empty range is on
	}
	at := min(max(subject.Start.Byte, 0), len(src))
	ls := bytes.LastIndexByte(src[:start], '\n') + 1
	num := bytes.Count(src[:ls], []byte{'\n'}) + 1
	var out []snippetLine
	for ; ls < len(src) && ls <= end; num++ {
		le := len(src)
		if i := bytes.IndexByte(src[ls:], '\n'); i >= 0 {
			le = ls + i
		}
		text := bytes.TrimSuffix(src[ls:le], []byte{'\r'})
		if overlaps(ls, ls+len(text), start, end) {
			if len(out) == maxSnippetLines {
				out = append(out, snippetLine{})
				break
			}
			line, _ := clip(string(text), min(max(at-ls, 0), len(text)), maxLineWidth)
			out = append(out, snippetLine{num, line})
		}
		ls = le + 1
	}
	return out
}

// overlaps is hcl.Range.Overlaps on byte offsets, so that the lines shown
// are the lines HCL's writer shows.
func overlaps(a0, a1, b0, b1 int) bool {
	in := func(x0, x1, o int) bool { return o >= x0 && o < x1 }
	if a0 == a1 || b0 == b1 {
		return false
	}
	return in(a0, a1, b0) || in(a0, a1, b1) || in(b0, b1, a0) || in(b0, b1, a1)
}

// clip cuts s to about width bytes around s[at], marking each cut with
// "...". It returns the text and how far s[at] moved to the left.
func clip(s string, at, width int) (string, int) {
	if len(s) <= width {
		return s, 0
	}
	from := max(0, min(at-width/4, len(s)-width))
	to := min(len(s), from+width)
	for from > 0 && !utf8.RuneStart(s[from]) {
		from--
	}
	for to < len(s) && !utf8.RuneStart(s[to]) {
		to--
	}
	out, shift := s[from:to], from
	if from > 0 {
		out, shift = "..."+out, shift-3
	}
	if to < len(s) {
		out += "..."
	}
	return out, shift
}

// The shape of `terraform validate -json`.
type jsonOutput struct {
	FormatVersion string           `json:"format_version"`
	Valid         bool             `json:"valid"`
	ErrorCount    int              `json:"error_count"`
	WarningCount  int              `json:"warning_count"`
	Diagnostics   []jsonDiagnostic `json:"diagnostics"`
}

type jsonDiagnostic struct {
	Severity string       `json:"severity"`
	Summary  string       `json:"summary"`
	Detail   string       `json:"detail"`
	Range    *jsonRange   `json:"range,omitempty"`
	Snippet  *jsonSnippet `json:"snippet,omitempty"`
}

type jsonPos struct {
	Line   int `json:"line"`
	Column int `json:"column"`
	Byte   int `json:"byte"`
}

type jsonRange struct {
	Filename string  `json:"filename"`
	Start    jsonPos `json:"start"`
	End      jsonPos `json:"end"`
}

type jsonSnippet struct {
	Context              *string `json:"context"`
	Code                 string  `json:"code"`
	StartLine            int     `json:"start_line"`
	HighlightStartOffset int     `json:"highlight_start_offset"`
	HighlightEndOffset   int     `json:"highlight_end_offset"`
	Values               []any   `json:"values"`
}

// WriteJSON writes the diagnostics as `terraform validate -json` does.
func (d *Diagnostics) WriteJSON(w io.Writer) error {
	errs, warns := d.Count()
	out := jsonOutput{
		FormatVersion: "1.0",
		Valid:         errs == 0,
		ErrorCount:    errs,
		WarningCount:  warns,
		Diagnostics:   []jsonDiagnostic{},
	}
	for _, x := range d.All() {
		jd := jsonDiagnostic{Severity: "error", Summary: x.Summary, Detail: x.Detail}
		if x.Severity != hcl.DiagError {
			jd.Severity = "warning"
		}
		if x.Subject != nil {
			s := *x.Subject
			jd.Range = &jsonRange{
				Filename: s.Filename,
				Start:    jsonPos{s.Start.Line, s.Start.Column, s.Start.Byte},
				End:      jsonPos{s.End.Line, s.End.Column, s.End.Byte},
			}
			jd.Snippet = d.snippet(s)
		}
		out.Diagnostics = append(out.Diagnostics, jd)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}

// snippet is the source lines of the subject (at most maxSnippetLines,
// cut around the subject when long) and where in them it is, as byte
// offsets into Code.
func (d *Diagnostics) snippet(s hcl.Range) *jsonSnippet {
	f := d.files[s.Filename]
	if f == nil || s.Start.Byte < 0 || s.Start.Byte > s.End.Byte || s.End.Byte > len(f.Bytes) {
		return nil
	}
	src := f.Bytes
	start := bytes.LastIndexByte(src[:s.Start.Byte], '\n') + 1
	end := s.End.Byte
	if end > start && end > s.Start.Byte && src[end-1] == '\n' {
		end-- // a range ending at a line break does not take in the next line
	}
	if i := bytes.IndexByte(src[end:], '\n'); i >= 0 {
		end += i
	} else {
		end = len(src)
	}
	if i := nthIndexByte(src[start:end], '\n', maxSnippetLines); i >= 0 {
		end = start + i
	}
	code, shift := clip(string(bytes.TrimRight(src[start:end], "\r")), s.Start.Byte-start, maxSnippetLines*maxLineWidth)
	sn := &jsonSnippet{
		Code:                 code,
		StartLine:            s.Start.Line,
		HighlightStartOffset: min(max(s.Start.Byte-start-shift, 0), len(code)),
		HighlightEndOffset:   min(max(s.End.Byte-start-shift, 0), len(code)),
		Values:               []any{},
	}
	sn.HighlightEndOffset = max(sn.HighlightEndOffset, sn.HighlightStartOffset)
	if _, ok := f.Body.(*hclsyntax.Body); ok {
		if c := escape(hcled.ContextString(f, s.Start.Byte-1), false); c != "" {
			sn.Context = &c
		}
	}
	return sn
}

// nthIndexByte is the index of the nth c in b (n from 1), or -1.
func nthIndexByte(b []byte, c byte, n int) int {
	at := -1
	for ; n > 0; n-- {
		i := bytes.IndexByte(b[at+1:], c)
		if i < 0 {
			return -1
		}
		at += 1 + i
	}
	return at
}

// Limits on what Load reports and the writers print, so that no input
// floods a terminal or a log.
const (
	maxDiags        = 50 // after these, one diagnostic counts the rest
	maxSummary      = 200
	maxDetail       = 2000
	maxSnippetLines = 10
	maxLineWidth    = 200
)

// finish makes the diagnostics fit to show, whatever found them: at most
// maxDiags, bounded text, no control characters, and no secret. Labels,
// names, values and file names reach the text from the files and the
// command line; a terminal would obey the escape sequences in them. A
// secret, or a value read with env() or file(), reaches it when a function
// quotes its argument; red masks them in Summary and Detail before the text
// is escaped or cut, which would hide them from it. Snippets show the
// source as written, not values, and stay.
func (d *Diagnostics) finish(red *redact.Set) {
	d.diags = limitDiags(d.diags)
	files := make(map[string]*hcl.File, len(d.files))
	for name, f := range d.files {
		c := *f
		// The snippets show the source as written, but not a secret in
		// it: a sensitive variable's value on a line of a variable
		// file, a token written literally.
		c.Bytes = red.Blank(sanitize(f.Bytes))
		files[escape(name, false)] = &c
	}
	d.files = files
	for _, x := range d.diags {
		x.Summary = truncate(escape(red.String(x.Summary), false), maxSummary)
		x.Detail = truncate(escape(red.String(x.Detail), true), maxDetail)
		x.Subject = escapeRange(x.Subject)
		x.Context = escapeRange(x.Context)
	}
}

// limitDiags keeps the first maxDiags diagnostics and counts the rest in
// one more. It is an error when any of the rest is: a configuration with
// errors must stay invalid.
func limitDiags(diags hcl.Diagnostics) hcl.Diagnostics {
	if len(diags) <= maxDiags {
		return diags
	}
	rest := &Diagnostics{diags: diags[maxDiags:]}
	errs, warns := rest.Count()
	severity := hcl.DiagWarning
	if errs > 0 {
		severity = hcl.DiagError
	}
	return append(diags[:maxDiags:maxDiags], &hcl.Diagnostic{
		Severity: severity,
		Summary:  "Too many problems",
		Detail:   fmt.Sprintf("%d more problems (%d errors, %d warnings) were found and are not shown. Fix the ones above first.", errs+warns, errs, warns),
	})
}

func escapeRange(r *hcl.Range) *hcl.Range {
	if r == nil {
		return nil
	}
	c := *r
	c.Filename = escape(c.Filename, false)
	return &c
}

// unsafe reports whether r (decoded from size bytes) must not reach a
// terminal: an invalid byte, a control character, or a bidirectional
// control that reorders what is shown.
func unsafe(r rune, size int) bool {
	return r == utf8.RuneError && size == 1 || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
}

// escape writes the unsafe characters of s as Go escapes (\x1b, \u202e),
// keeping newlines when multiline.
func escape(s string, multiline bool) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case multiline && r == '\n', !unsafe(r, size):
			b.WriteString(s[i : i+size])
		case size == 1:
			fmt.Fprintf(&b, "\\x%02x", s[i])
		default:
			fmt.Fprintf(&b, "\\u%04x", r)
		}
		i += size
	}
	return b.String()
}

// sanitize replaces the unsafe bytes of a file's source with '?', byte for
// byte so that every range into it stays valid. Tabs and line ends stay.
func sanitize(src []byte) []byte {
	var out []byte
	for i := 0; i < len(src); {
		r, size := utf8.DecodeRune(src[i:])
		keep := r == '\n' || r == '\t' || r == '\r' && i+1 < len(src) && src[i+1] == '\n'
		if !keep && unsafe(r, size) {
			if out == nil {
				out = bytes.Clone(src)
			}
			for j := i; j < i+size; j++ {
				out[j] = '?'
			}
		}
		i += size
	}
	if out == nil {
		return src
	}
	return out
}

// truncate cuts s to at most n bytes and a mark.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + " [...]"
}
