package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hcled"
	"github.com/hashicorp/hcl/v2/hclsyntax"
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

// WriteText writes every diagnostic as HCL's diagnostic writer does:
// file:line:col, a source snippet, no color, no wrapping.
func (d *Diagnostics) WriteText(w io.Writer) error {
	if d.Len() == 0 {
		return nil
	}
	return hcl.NewDiagnosticTextWriter(w, d.files, 0, false).WriteDiagnostics(d.diags)
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

// snippet is the source lines of the subject and where in them it is, as
// byte offsets into Code.
func (d *Diagnostics) snippet(s hcl.Range) *jsonSnippet {
	f := d.files[s.Filename]
	if f == nil || s.Start.Byte > len(f.Bytes) || s.End.Byte > len(f.Bytes) || s.Start.Byte > s.End.Byte {
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
	sn := &jsonSnippet{
		Code:                 string(bytes.TrimRight(src[start:end], "\r")),
		StartLine:            s.Start.Line,
		HighlightStartOffset: s.Start.Byte - start,
		HighlightEndOffset:   s.End.Byte - start,
		Values:               []any{},
	}
	if sn.HighlightEndOffset > len(sn.Code) {
		sn.HighlightEndOffset = len(sn.Code)
	}
	if _, ok := f.Body.(*hclsyntax.Body); ok {
		if c := hcled.ContextString(f, s.Start.Byte-1); c != "" {
			sn.Context = &c
		}
	}
	return sn
}
