package redact

import (
	"bytes"
	"encoding/json"
	"io"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Mask replaces each secret.
const Mask = "[redacted]"

// MinLen is the shortest secret that is masked. A value of one to three
// bytes ("1", "on", "abc") occurs in ordinary text, and masking it would
// garble every line while hiding nothing worth hiding.
const MinLen = 4

// Set is the secrets known so far. It is safe for concurrent use, and Add
// may run while other goroutines redact: a reload adds the new
// configuration's secrets to those of the running one. A nil *Set masks
// nothing.
type Set struct {
	mu      sync.Mutex      // serialises Add
	added   map[string]bool // the secrets given to Add, under mu
	secrets atomic.Pointer[[]string]
}

// New returns a Set of the given secrets.
func New(secrets ...string) *Set {
	s := &Set{}
	s.Add(secrets...)
	return s
}

// maxEncoded is the longest secret whose encoded forms are masked too;
// a longer one (a file read whole) is masked as written. Its forms would
// cost memory out of proportion, and no message quotes it whole.
const maxEncoded = 64 << 10

// Add adds secrets; empty and short ones (under MinLen bytes) are ignored.
// Secrets are never removed: a line about an old configuration's DSN may
// still be written after a reload replaced it.
func (s *Set) Add(secrets ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.added == nil {
		s.added = map[string]bool{}
	}
	var next []string
	seen := map[string]bool{}
	if cur := s.secrets.Load(); cur != nil {
		next = append(next, *cur...)
		for _, v := range next {
			seen[v] = true
		}
	}
	for _, v := range secrets {
		if len(v) < MinLen || s.added[v] {
			continue
		}
		s.added[v] = true
		fs := []string{v}
		if len(v) <= maxEncoded {
			fs = forms(v)
		}
		for _, f := range fs {
			if !seen[f] {
				seen[f] = true
				next = append(next, f)
			}
		}
	}
	s.secrets.Store(&next)
}

// forms are the ways a value is written once it has passed through the
// encoders between the agent and a reader: as is, quoted by Go (%q in an
// error message), escaped by hclog's text format, in a JSON string (the API,
// log_format = "json"; with HTML escaping, which turns a SAS token's & into
// \u0026), and escaped in a URL (a request URL in an HTTP client's error).
// Encoders nest (a %q inside an error that the JSON logger escapes), so
// pairs of them are applied too. For an ordinary value most forms are the
// value itself, and Add keeps one copy.
func forms(v string) []string {
	var out []string
	for _, f := range encoders {
		for _, g := range encoders {
			out = append(out, g(f(v)))
		}
	}
	return out
}

var encoders = []func(string) string{
	func(v string) string { return v },
	func(v string) string { q := strconv.Quote(v); return q[1 : len(q)-1] },
	func(v string) string { return strings.ReplaceAll(v, `"`, `\"`) },
	func(v string) string { j, _ := json.Marshal(v); return string(j[1 : len(j)-1]) },
	url.QueryEscape,
	url.PathEscape,
}

// String returns text with every occurrence of every secret replaced by
// Mask. Occurrences that overlap or touch (a password and the DSN that holds
// it) become one Mask, so no fragment of either is left: every byte of text
// that belongs to an occurrence of a secret is masked.
func (s *Set) String(text string) string {
	if s == nil {
		return text
	}
	cur := s.secrets.Load()
	if cur == nil {
		return text
	}
	type span struct{ start, end int }
	var spans []span
	for _, v := range *cur {
		// Overlapping occurrences too: "aaaa" twice in "aaaaa".
		for i := 0; ; {
			j := strings.Index(text[i:], v)
			if j < 0 {
				break
			}
			spans = append(spans, span{i + j, i + j + len(v)})
			i += j + 1
		}
	}
	if len(spans) == 0 {
		return text
	}
	slices.SortFunc(spans, func(a, b span) int { return a.start - b.start })
	var b strings.Builder
	at := 0 // text[:at] is written
	for k := 0; k < len(spans); {
		start, end := spans[k].start, spans[k].end
		for k++; k < len(spans) && spans[k].start <= end; k++ {
			end = max(end, spans[k].end)
		}
		b.WriteString(text[at:start])
		b.WriteString(Mask)
		at = end
	}
	b.WriteString(text[at:])
	return b.String()
}

// Blank returns b with every byte that belongs to an occurrence of a
// secret replaced by '*', and the same length: source text whose offsets
// must stay where they are (a diagnostic's snippet and its highlight). b
// itself is not changed.
func (s *Set) Blank(b []byte) []byte {
	if s == nil {
		return b
	}
	cur := s.secrets.Load()
	if cur == nil {
		return b
	}
	var out []byte
	text := string(b)
	for _, v := range *cur {
		for i := 0; ; {
			j := strings.Index(text[i:], v)
			if j < 0 {
				break
			}
			if out == nil {
				out = bytes.Clone(b)
			}
			for k := i + j; k < i+j+len(v); k++ {
				out[k] = '*'
			}
			i += j + 1
		}
	}
	if out == nil {
		return b
	}
	return out
}

// Writer returns a writer that redacts each write before passing it to w.
// A secret split across two writes is not found, so w must be written
// whole lines at a time, as go-hclog does (one Write per line).
func (s *Set) Writer(w io.Writer) io.Writer { return writer{s, w} }

type writer struct {
	s *Set
	w io.Writer
}

func (w writer) Write(p []byte) (int, error) {
	if _, err := io.WriteString(w.w, w.s.String(string(p))); err != nil {
		return 0, err
	}
	// The caller wrote p; what reached w is shorter or longer.
	return len(p), nil
}
