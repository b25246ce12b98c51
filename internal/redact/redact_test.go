package redact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestString(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
		in      string
		want    string
	}{
		{"none known", nil, "dial tcp: refused", "dial tcp: refused"},
		{"whole value", []string{"hunter22"}, "auth failed for hunter22.", "auth failed for [redacted]."},
		{"every occurrence", []string{"hunter22"}, "hunter22 and hunter22", "[redacted] and [redacted]"},
		{"part inside a longer secret", []string{"s3cret!", "postgres://u:s3cret!@db/x"},
			"cannot parse postgres://u:s3cret!@db/x; password s3cret!", "cannot parse [redacted]; password [redacted]"},
		{"overlapping secrets leave no fragment", []string{"abcdef", "cdefgh"}, "xabcdefghx", "x[redacted]x"},
		{"overlapping occurrences of one secret", []string{"aaaa"}, "aaaaa b", "[redacted] b"},
		{"short values are not secrets", []string{"", "a", "on", "abc"}, "a b on abc", "a b on abc"},
		{"four bytes are", []string{"abcd"}, "xabcdx", "x[redacted]x"},
		{"go-quoted", []string{`pa"ss\word`}, fmt.Sprintf("%q", `pa"ss\word`), `"[redacted]"`},
		{"json with html escaping", []string{"sv=1&sig=AbC+/="}, jsonString("sv=1&sig=AbC+/="), `"[redacted]"`},
		{"query-escaped in a URL", []string{"AbC+/="}, "PUT http://h/b?sig=" + url.QueryEscape("AbC+/=") + "&sv=1", "PUT http://h/b?sig=[redacted]&sv=1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := New(tt.secrets...).String(tt.in); got != tt.want {
				t.Errorf("String(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestNilSetMasksNothing(t *testing.T) {
	var s *Set
	if got := s.String("hunter22"); got != "hunter22" {
		t.Fatalf("nil Set changed the text: %q", got)
	}
}

// A reload adds the new configuration's secrets and keeps the old ones.
func TestAddKeepsOldSecrets(t *testing.T) {
	s := New("old-password")
	s.Add("new-password")
	if got := s.String("old-password new-password"); got != "[redacted] [redacted]" {
		t.Fatalf("got %q", got)
	}
}

// The agent's logger writes through Writer: a secret in any attribute, at
// any level, in text or JSON format, never reaches the output.
func TestWriterWithHclog(t *testing.T) {
	const secret = `p&ss"w\ord<1>`
	for _, jsonFormat := range []bool{false, true} {
		var out bytes.Buffer
		s := New()
		log := hclog.New(&hclog.LoggerOptions{Level: hclog.Trace, JSONFormat: jsonFormat, Output: s.Writer(&out)})
		s.Add(secret) // added after the logger was made, as a reload does
		log.Trace("connecting to " + secret)
		log.Warn("cannot acquire", "error", fmt.Errorf("dial %q: refused", "u:"+secret+"@db"))
		log.Error("failed", "dsn", "postgres://u:"+url.QueryEscape(secret)+"@db/x")
		for _, form := range []string{secret, `ss"w`, `ss\"w`, "p\\u0026ss", "ss%22w"} {
			if strings.Contains(out.String(), form) {
				t.Errorf("json=%v: %q in the log:\n%s", jsonFormat, form, out.String())
			}
		}
		if n := strings.Count(out.String(), Mask); n != 3 {
			t.Errorf("json=%v: %d masks, want 3:\n%s", jsonFormat, n, out.String())
		}
	}
}

func TestConcurrentAdd(t *testing.T) {
	s := New()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(2)
		go func() { defer wg.Done(); s.Add(fmt.Sprintf("secret-%d", i)) }()
		go func() { defer wg.Done(); s.String("secret-1 secret-2") }()
	}
	wg.Wait()
	if got := s.String("secret-3"); got != Mask {
		t.Fatalf("got %q", got)
	}
}

// Blank masks as String does, byte for byte, keeping the length and
// leaving its argument alone.
func TestBlank(t *testing.T) {
	s := New("hunter22", "abcdef", "cdefgh", "ab")
	in := []byte(`pw = "hunter22" # xabcdefghx ab`)
	orig := string(in)
	got := s.Blank(in)
	if want := `pw = "********" # x********x ab`; string(got) != want {
		t.Errorf("Blank = %q, want %q", got, want)
	}
	if string(in) != orig {
		t.Errorf("Blank changed its argument to %q", in)
	}
	if clean := []byte("nothing secret"); &s.Blank(clean)[0] != &clean[0] {
		t.Error("Blank copied text without secrets")
	}
	var none *Set
	if got := none.Blank([]byte("x")); string(got) != "x" {
		t.Errorf("nil Set: %q", got)
	}
}
