package attr

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/zclconf/go-cty/cty"
)

// values is a Source over given values: an attribute not in the map is not
// written. It records the problems reported, as "name: summary: detail".
type values struct {
	v        map[string]cty.Value
	problems []string
}

func (s *values) Value(name string, want cty.Type) cty.Value {
	if v, ok := s.v[name]; ok {
		return v
	}
	return cty.NullVal(want)
}

func (s *values) Error(name, summary, detail string) {
	s.problems = append(s.problems, name+": "+summary+": "+detail)
}

func src(name string, v cty.Value) *values { return &values{v: map[string]cty.Value{name: v}} }

func TestConversions(t *testing.T) {
	for _, tc := range []struct {
		name    string
		v       cty.Value
		read    func(Source) any
		want    any
		problem string // a part of the one problem expected, "" for none
	}{
		{"line", cty.StringVal("tok"), func(s Source) any { return Line(s, "x", "d") }, "tok", ""},
		{"line unset", cty.NullVal(cty.String), func(s Source) any { return Line(s, "x", "d") }, "d", ""},
		{"line unknown", cty.UnknownVal(cty.String), func(s Source) any { return Line(s, "x", "d") }, "d", ""},
		{"line with a newline", cty.StringVal("tok\n"), func(s Source) any { return Line(s, "x", "d") }, "tok\n",
			"x: Invalid x: The x holds a line break. It must be one line"},
		{"line with a tab", cty.StringVal("a\tb"), func(s Source) any { return Line(s, "x", "d") }, "a\tb", "holds a control character"},
		{"string keeps a newline", cty.StringVal("a\n"), func(s Source) any { return String(s, "x", "d") }, "a\n", ""},
		{"lines", cty.ListVal([]cty.Value{cty.StringVal("a"), cty.StringVal("b")}), func(s Source) any { return Lines(s, "x") }, []string{"a", "b"}, ""},
		{"lines empty", cty.ListValEmpty(cty.String), func(s Source) any { return Lines(s, "x") }, []string{}, ""},
		{"lines unset", cty.NullVal(cty.List(cty.String)), func(s Source) any { return Lines(s, "x") }, []string(nil), ""},
		{"lines partly unknown", cty.ListVal([]cty.Value{cty.StringVal("a"), cty.UnknownVal(cty.String)}), func(s Source) any { return Lines(s, "x") }, []string(nil), ""},
		{"lines with null", cty.ListVal([]cty.Value{cty.StringVal("a"), cty.NullVal(cty.String)}), func(s Source) any { return Lines(s, "x") }, []string(nil),
			"x: Invalid list element: The elements of x must be strings, not null."},
		{"lines with a newline", cty.ListVal([]cty.Value{cty.StringVal("a\n")}), func(s Source) any { return Lines(s, "x") }, []string{"a\n"}, "x: Invalid x: The x holds a line break"},
		{"bool", cty.True, func(s Source) any { return Bool(s, "x", false) }, true, ""},
		{"bool unknown", cty.UnknownVal(cty.Bool), func(s Source) any { return Bool(s, "x", true) }, true, ""},
		{"int", cty.NumberIntVal(3), func(s Source) any { n, ok := Int(s, "x", 7, 1, 5); return [2]any{n, ok} }, [2]any{3, true}, ""},
		{"int unset", cty.NullVal(cty.Number), func(s Source) any { n, ok := Int(s, "x", 7, 1, 5); return [2]any{n, ok} }, [2]any{7, true}, ""},
		{"int unknown", cty.UnknownVal(cty.Number), func(s Source) any { n, ok := Int(s, "x", 7, 1, 5); return [2]any{n, ok} }, [2]any{7, false}, ""},
		{"int out of range", cty.NumberIntVal(6), func(s Source) any { n, ok := Int(s, "x", 7, 1, 5); return [2]any{n, ok} }, [2]any{7, false},
			"x: Invalid x: The x must be a whole number from 1 to 5."},
		{"int not whole", cty.NumberFloatVal(1.5), func(s Source) any { n, ok := Int(s, "x", 7, 1, 5); return [2]any{n, ok} }, [2]any{7, false}, "whole number from 1 to 5"},
		{"int without a range", cty.NumberFloatVal(1.5), func(s Source) any { n, _ := Int(s, "x", 7, MinInt, MaxInt); return n }, 7,
			"x: Invalid x: The x must be a whole number."},
		{"int beyond 32 bits", cty.NumberIntVal(1 << 40), func(s Source) any { n, _ := Int(s, "x", 7, MinInt, MaxInt); return n }, 7, "must be a whole number."},
		{"duration", cty.StringVal("1m30s"), func(s Source) any { d, ok := Duration(s, "x", time.Second, false); return [2]any{d, ok} }, [2]any{90 * time.Second, true}, ""},
		{"duration unset", cty.NullVal(cty.String), func(s Source) any { d, ok := Duration(s, "x", time.Second, false); return [2]any{d, ok} }, [2]any{time.Second, true}, ""},
		{"duration unknown", cty.UnknownVal(cty.String), func(s Source) any { d, ok := Duration(s, "x", time.Second, true); return [2]any{d, ok} }, [2]any{time.Second, false}, ""},
		{"duration zero", cty.StringVal("0s"), func(s Source) any { d, ok := Duration(s, "x", time.Second, false); return [2]any{d, ok} }, [2]any{time.Duration(0), true}, ""},
		{"duration zero, positive", cty.StringVal("0s"), func(s Source) any { d, _ := Duration(s, "x", time.Second, true); return d }, time.Second,
			"x: Invalid duration: The x must be positive."},
		{"duration negative", cty.StringVal("-1s"), func(s Source) any { d, _ := Duration(s, "x", time.Second, false); return d }, time.Second,
			"x: Invalid duration: The x must not be negative."},
		{"duration negative, positive", cty.StringVal("-1s"), func(s Source) any { d, _ := Duration(s, "x", time.Second, true); return d }, time.Second, "The x must be positive."},
		{"duration unparsable", cty.StringVal("5 s"), func(s Source) any { d, ok := Duration(s, "x", time.Second, true); return [2]any{d, ok} }, [2]any{time.Second, false},
			`x: Invalid duration: The x must be a Go duration string such as "500ms", "30s", "5m" or "1h30m".`},
		{"enum", cty.StringVal("b"), func(s Source) any { return Enum(s, "x", "a", "a", "b") }, "b", ""},
		{"enum unset", cty.NullVal(cty.String), func(s Source) any { return Enum(s, "x", "a", "a", "b") }, "a", ""},
		{"enum unknown", cty.UnknownVal(cty.String), func(s Source) any { return Enum(s, "x", "a", "a", "b") }, "a", ""},
		{"enum other", cty.StringVal("secret"), func(s Source) any { return Enum(s, "x", "a", "a", "b", "c") }, "a",
			`x: Invalid x: The x must be one of "a", "b" or "c".`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := src("x", tc.v)
			if got := tc.read(s); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
			switch {
			case tc.problem == "" && len(s.problems) > 0:
				t.Errorf("problems %q, want none", s.problems)
			case tc.problem != "" && (len(s.problems) != 1 || !strings.Contains(s.problems[0], tc.problem)):
				t.Errorf("problems %q, want one with %q", s.problems, tc.problem)
			}
			for _, p := range s.problems {
				if strings.Contains(p, "secret") {
					t.Errorf("the problem %q repeats the value", p)
				}
			}
		})
	}
}

func TestJoinQuoted(t *testing.T) {
	for _, tc := range []struct {
		xs   []string
		want string
	}{
		{nil, ""},
		{[]string{"a"}, `"a"`},
		{[]string{"a", "b"}, `"a" or "b"`},
		{[]string{"a", "b", "c"}, `"a", "b" or "c"`},
	} {
		if got := JoinQuoted(tc.xs, "or"); got != tc.want {
			t.Errorf("JoinQuoted(%q) = %s, want %s", tc.xs, got, tc.want)
		}
	}
}
