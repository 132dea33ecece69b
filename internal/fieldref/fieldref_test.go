package fieldref

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

var names = []string{"op", "banned", "discord", "a", "é"}

// TestFilter checks the oracle's answers on documents whose filtered form is
// written out by hand: what it removes and keeps, where meta goes, the blanks
// sjson leaves, names with path syntax, and duplicates.
func TestFilter(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		hidden         []string
		auth           bool
	}{
		{"player", `{"ok":true,"meta":{"version":"v1"},"data":{"op":true,"x":1}}`,
			`{"ok":true,"data":{"x":1},"meta":{"version":"v1","authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, false},
		{"nothing to remove, no meta", `{}`, `{"meta":{"authenticated":true}}`, nil, true},
		{"every depth, inside arrays, not inside removed values",
			`{"x":{"banned":[{"discord":null}]},"y":[[{"a":1,"b":2}]],"op":{"discord":1}}`,
			`{"x":{},"y":[[{"b":2}]],"meta":{"authenticated":false,"hiddenFields":["op","banned","a"]}}`, []string{"op", "banned", "a"}, false},
		{"names after unescaping", `{"o\u0070":1,"\u00e9":2,"\u00E9":{"a":3},"role":"op","opx":4,"OP":5,"op ":6}`,
			`{"role":"op","opx":4,"OP":5,"op ":6,"meta":{"authenticated":false,"hiddenFields":["op","é"]}}`, []string{"op", "é"}, false},
		{"meta's own members replaced, the rest of meta untouched",
			`{"meta":{"authenticated":true,"op":1,"hiddenFields":[1],"authenticat\u0065d":null,"v":2},"op":0}`,
			`{"meta":{"op":1,"v":2,"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, false},
		{"duplicates of a protected name all go", `{"op":1,"x":2,"op":3,"y":{"op":4,"op":5}}`,
			`{"x":2,"y":{},"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, false},
		{"a duplicated protected parent goes whole", `{"a":[{"op":1}],"a":[{"op":2}]}`,
			`{"meta":{"authenticated":false,"hiddenFields":["a"]}}`, []string{"a"}, false},
		{"a duplicated name without protected members inside", `{"x":{"k":1},"x":{"k":2},"op":1}`,
			`{"x":{"k":1},"x":{"k":2},"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, false},
		{"names with path syntax",
			`{"x":{"a.b":{"op":1},"":{"op":2},":x":{"op":3},"#":{"op":4},"@this":{"op":5},"-1":{"op":6},"\\":{"op":7},"*":{"op":8},"!":{"op":9},"[":{"op":10},"\"":{"op":11},"0":[{"op":12}],"|":{"op":13}}}`,
			`{"x":{"a.b":{},"":{},":x":{},"#":{},"@this":{},"-1":{},"\\":{},"*":{},"!":{},"[":{},"\"":{},"0":[{}],"|":{}},"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, false},
		{"number text kept", `{"seed":-4172144997902289642,"hp":20.0,"big":1e400,"op":1}`,
			`{"seed":-4172144997902289642,"hp":20.0,"big":1e400,"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, false},
		{"blanks: sjson keeps those before the comma and after the value", " { \"x\":1 , \"op\":2 , \"y\":3 } \n",
			`{ "x":1  , "y":3 ,"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, false},
		{"blanks: a first member goes with the comma after it", `{ "op" : 1 , "x" : { } }`,
			`{ "x" : { } ,"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, hidden, err := Filter([]byte(tc.in), names, Options{Authenticated: tc.auth, MaxDepth: 100})
			if err != nil || string(out) != tc.want || !slices.Equal(hidden, tc.hidden) {
				t.Errorf("Filter(%s)\n = %s %q %v\nwant %s %q", tc.in, out, hidden, err, tc.want, tc.hidden)
			}
		})
	}
}

// TestRefusals checks the documents the field layer must refuse, with the
// kind the filter gives them.
func TestRefusals(t *testing.T) {
	deep := strings.Repeat(`{"x":`, 6) + "1" + strings.Repeat("}", 6) // 6 levels
	for _, tc := range []struct {
		name, in string
		kinds    []error
	}{
		{"truncated: gjson.Get would read it", `{"a":{"op":1,"b":[1,2`, []error{ErrSyntax}},
		{"garbage after the object", `{}x`, []error{ErrSyntax}},
		{"byte order mark", "\xef\xbb\xbf{}", []error{ErrSyntax}},
		{"empty", ``, []error{ErrSyntax}},
		{"lone minus", `{"x":-}`, []error{ErrSyntax}},
		{"array", `[{"op":1}]`, []error{ErrNotObject}},
		{"string", `"op"`, []error{ErrNotObject}},
		{"duplicate meta", `{"meta":{},"meta":{}}`, []error{ErrMeta}},
		{"escaped duplicate meta", `{"meta":{},"m\u0065ta":{}}`, []error{ErrMeta}},
		{"meta a number", `{"meta":1}`, []error{ErrMeta}},
		{"meta null", `{"meta":null}`, []error{ErrMeta}},
		{"too deep", deep, []error{ErrDepth}},
		{"too deep inside meta", `{"meta":` + deep + `}`, []error{ErrDepth}},
		{"too deep and a bad meta", `{"meta":1,"y":` + deep + `}`, []error{ErrDepth, ErrMeta}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := Filter([]byte(tc.in), names, Options{MaxDepth: 5})
			var r *Refusal
			if !errors.As(err, &r) || !slices.Equal(r.Kinds, tc.kinds) {
				t.Fatalf("Filter(%s) = %s, %v; want a refusal %v", tc.in, out, err, tc.kinds)
			}
		})
	}
	if _, _, err := Filter([]byte(deep), names, Options{}); err != nil {
		t.Errorf("without a limit: %v", err)
	}
	if _, _, err := Filter([]byte(deep), names, Options{MaxDepth: 6}); err != nil {
		t.Errorf("at the limit: %v", err)
	}
}

// TestInexpressible checks that the oracle declines, rather than answers
// wrongly, where a path cannot lead to a protected member.
func TestInexpressible(t *testing.T) {
	for _, tc := range []struct{ name, in, why string }{
		{"protected under a second member of one name", `{"x":{"k":1},"x":{"op":1}}`, "duplicated name"},
		{"deeper under it", `{"x":1,"y":[{"x":{"op":1}}],"x":[{"z":{"banned":2}}]}`, "duplicated name"},
		{"under a duplicate inside a duplicate", `{"x":1,"x":{"y":1,"y":{"op":1}}}`, "duplicated name"},
		{"under a name gjson unescapes alike", `{"\ud800":1,"\udfff":{"op":1}}`, "duplicated name"},
		{"a path that begins with two empty names: gjson's JSON Lines", `{"":{"":{"op":1}}}`, "gjson resolves the path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, err := Filter([]byte(tc.in), names, Options{})
			var e *Inexpressible
			if !errors.As(err, &e) || !strings.Contains(e.Reason, tc.why) {
				t.Fatalf("Filter(%s) = %s, %v; want it inexpressible (%s)", tc.in, out, err, tc.why)
			}
		})
	}
}
