package jsonfilter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
)

// result is what one run of the filter produced.
type result struct {
	out    string
	hidden []string
	err    error
}

// feed streams in through a Filter in chunks cut by next (which returns the
// next chunk length).
func feed(in []byte, names *Names, opts Options, next func(rest int) int) result {
	var out bytes.Buffer
	f := New(&out, names, opts)
	for len(in) > 0 {
		k := min(next(len(in)), len(in))
		if _, err := f.Write(in[:0]); err != nil { // an empty Write changes nothing
			return result{out.String(), nil, err}
		}
		if _, err := f.Write(in[:k]); err != nil {
			return result{out.String(), nil, err}
		}
		in = in[k:]
	}
	if err := f.Close(); err != nil {
		return result{out.String(), nil, err}
	}
	return result{out.String(), slices.Clone(f.Hidden()), nil}
}

// runAll filters in whole (Apply), through Write in one piece, one byte at a
// time and in random chunks, and fails the test unless all agree: the same
// output when they succeed, an error in each when one fails.
func runAll(t *testing.T, in []byte, names *Names, opts Options) result {
	t.Helper()
	out, hidden, err := Apply(nil, in, names, opts)
	whole := result{string(out), hidden, err}
	rng := rand.New(rand.NewPCG(uint64(len(in)), 7))
	runs := map[string]result{
		"write": feed(in, names, opts, func(rest int) int { return rest }),
		"bytes": feed(in, names, opts, func(int) int { return 1 }),
		"random": feed(in, names, opts, func(rest int) int {
			return 1 + rng.IntN(min(rest, 40))
		}),
	}
	for name, got := range runs {
		if (got.err == nil) != (whole.err == nil) {
			t.Fatalf("%s: err %v, Apply err %v", name, got.err, whole.err)
		}
		if whole.err == nil && (got.out != whole.out || !slices.Equal(got.hidden, whole.hidden)) {
			t.Fatalf("%s: got %q %q, Apply gave %q %q", name, got.out, got.hidden, whole.out, whole.hidden)
		}
	}
	return whole
}

var opNames = NewNames([]string{"op", "banned", "discord"})

func TestFilter(t *testing.T) {
	const noMeta = `"meta":{"authenticated":false}`
	tests := []struct {
		name   string
		in     string
		want   string // filtered output; empty when an error is expected
		hidden []string
		err    error // wanted error kind
	}{
		{"basic example", `{"ok":true,"meta":{"version":"v1"},"data":{"op":true,"x":1}}`,
			`{"ok":true,"data":{"x":1},"meta":{"version":"v1","authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"only member removed", `{"op":1}`, `{"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"nested only member", `{"a":{"op":1}}`, `{"a":{},` + `"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"first member", `{"a":{"op":1,"b":2}}`, `{"a":{"b":2},"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"last member", `{"a":{"b":2,"op":1}}`, `{"a":{"b":2},"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"middle member", `{"a":{"b":2,"op":1,"c":3}}`, `{"a":{"b":2,"c":3},"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"every member", `{"a":{"op":1,"banned":false,"discord":"x"}}`,
			`{"a":{},"meta":{"authenticated":false,"hiddenFields":["op","banned","discord"]}}`, []string{"op", "banned", "discord"}, nil},
		{"every top-level member", `{"op":1,"banned":[1,{"x":2}],"discord":{}}`,
			`{"meta":{"authenticated":false,"hiddenFields":["op","banned","discord"]}}`, []string{"op", "banned", "discord"}, nil},
		{"hidden in configuration order", `{"discord":1,"op":2}`,
			`{"meta":{"authenticated":false,"hiddenFields":["op","discord"]}}`, []string{"op", "discord"}, nil},
		{"spaces around removed", "{ \"a\" : 1 , \"op\" : { \"x\" : [ 1 ] } , \"b\" : 2 }",
			`{ "a" : 1 , "b" : 2 ,"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"removed first with spaces", "{\n  \"op\": 1,\n  \"b\": 2\n}",
			"{\n  \"b\": 2\n,\"meta\":{\"authenticated\":false,\"hiddenFields\":[\"op\"]}}", []string{"op"}, nil},
		{"escaped key", `{"o\u0070":1,"x":2}`, `{"x":2,"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"fully escaped key", `{"x":{"\u006f\u0070":1}}`, `{"x":{},"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"escaped slash is not a name", `{"o\/p":1}`, `{"o\/p":1,` + noMeta + `}`, nil, nil},
		{"array of objects", `{"list":[{"op":1,"keep":2},{"keep":3,"op":4}]}`,
			`{"list":[{"keep":2},{"keep":3}],"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"duplicates", `{"a":{"op":1,"op":2,"x":0,"op":3}}`,
			`{"a":{"x":0},"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"duplicated parents", `{"a":[{"op":1}],"a":[{"op":2}]}`,
			`{"a":[{}],"a":[{}],"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"names in values", `{"role":"op","list":["op","banned"],"x":{"k":"discord"}}`,
			`{"role":"op","list":["op","banned"],"x":{"k":"discord"},` + noMeta + `}`, nil, nil},
		{"near misses", `{"opx":1,"OP":2,"op ":3," op":4,"o":5,"opp":6,"bann":7,"discords":8}`,
			`{"opx":1,"OP":2,"op ":3," op":4,"o":5,"opp":6,"bann":7,"discords":8,` + noMeta + `}`, nil, nil},
		{"removed value of every type", `{"x":[{"op":"s\"}"},{"op":-1.5e+3},{"op":true},{"op":null},{"op":[[],{}]},{"op":{"a":{"b":"}"}}}]}`,
			`{"x":[{},{},{},{},{},{}],"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"numbers verbatim", `{"seed":-4172144997902289642,"hp":20.0,"big":1e400,"e":1.5E+2,"z":-0,"f":0.00010}`,
			`{"seed":-4172144997902289642,"hp":20.0,"big":1e400,"e":1.5E+2,"z":-0,"f":0.00010,` + noMeta + `}`, nil, nil},
		{"escapes and unicode verbatim", `{"s":"\u00e9\n\"é→\ud83d\ude00","k\u00e9y":"\/"}`,
			`{"s":"\u00e9\n\"é→\ud83d\ude00","k\u00e9y":"\/",` + noMeta + `}`, nil, nil},
		{"empty object", `{}`, `{` + noMeta + `}`, nil, nil},
		{"empty object with space", "{ }", "{ " + noMeta + "}", nil, nil},
		{"empty nested objects and arrays", `{"a":{},"b":[],"c":[{}],"d":{ }}`, `{"a":{},"b":[],"c":[{}],"d":{ },` + noMeta + `}`, nil, nil},
		{"leading and trailing whitespace", " \n{\"a\":1}\r\n\t ", " \n{\"a\":1," + noMeta + "}", nil, nil},

		// meta
		{"meta first", `{"meta":{"v":1},"a":{"op":1}}`, `{"a":{},"meta":{"v":1,"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"meta last", `{"a":1,"meta":{"v":1}}`, `{"a":1,"meta":{"v":1,"authenticated":false}}`, nil, nil},
		{"meta only", `{"meta":{"v":1}}`, `{"meta":{"v":1,"authenticated":false}}`, nil, nil},
		{"meta empty", `{"meta":{}}`, `{"meta":{"authenticated":false}}`, nil, nil},
		{"meta absent, names removed", `{"x":{"banned":1}}`, `{"x":{},"meta":{"authenticated":false,"hiddenFields":["banned"]}}`, []string{"banned"}, nil},
		{"meta is not filtered", `{"meta":{"op":true,"x":{"banned":1}},"ok":true}`,
			`{"ok":true,"meta":{"op":true,"x":{"banned":1},"authenticated":false}}`, nil, nil},
		{"meta replaces authenticated and hiddenFields", `{"meta":{"authenticated":true,"version":"v1","hiddenFields":["x"],"authenticated":1},"op":1}`,
			`{"meta":{"version":"v1","authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"meta with only replaced members", `{"meta":{"authenticated":true}}`, `{"meta":{"authenticated":false}}`, nil, nil},
		{"meta nested names kept", `{"meta":{"x":{"authenticated":1,"hiddenFields":2}}}`,
			`{"meta":{"x":{"authenticated":1,"hiddenFields":2},"authenticated":false}}`, nil, nil},
		{"escaped meta key", `{"m\u0065ta":{"v":1},"a":1}`, `{"a":1,"meta":{"v":1,"authenticated":false}}`, nil, nil},
		{"nested meta is ordinary", `{"data":{"meta":{"op":1}}}`,
			`{"data":{"meta":{}},"meta":{"authenticated":false,"hiddenFields":["op"]}}`, []string{"op"}, nil},
		{"meta with spaces", `{ "meta" : { "v" : 1 } , "a" : 2 }`, `{ "a" : 2 ,"meta":{ "v" : 1 ,"authenticated":false}}`, nil, nil},
		{"meta not object", `{"meta":"x"}`, "", nil, ErrMeta},
		{"meta null", `{"a":1,"meta":null}`, "", nil, ErrMeta},
		{"meta array", `{"meta":[]}`, "", nil, ErrMeta},
		{"duplicate meta", `{"meta":{},"a":1,"meta":{}}`, "", nil, ErrMeta},
		{"duplicate escaped meta", `{"meta":{},"\u006deta":{}}`, "", nil, ErrMeta},

		// rejected input
		{"empty input", ``, "", nil, ErrTruncated},
		{"only whitespace", " \n", "", nil, ErrTruncated},
		{"truncated", `{"a":{"op":1,"b":[1,2`, "", nil, ErrTruncated},
		{"truncated in key", `{"a":{"o`, "", nil, ErrTruncated},
		{"truncated number", `{"a":1`, "", nil, ErrTruncated},
		{"truncated literal", `{"a":tru`, "", nil, ErrTruncated},
		{"truncated in meta", `{"meta":{"a":1`, "", nil, ErrTruncated},
		{"top-level array", `[{"op":1}]`, "", nil, ErrNotObject},
		{"top-level string", `"x"`, "", nil, ErrNotObject},
		{"top-level number", `12`, "", nil, ErrNotObject},
		{"top-level null", `null`, "", nil, ErrNotObject},
		{"BOM", "\xef\xbb\xbf{}", "", nil, ErrSyntax},
		{"trailing garbage", `{"a":1} x`, "", nil, ErrSyntax},
		{"two documents", `{}{}`, "", nil, ErrSyntax},
		{"trailing comma", `{"a":1,}`, "", nil, ErrSyntax},
		{"trailing comma in removed", `{"op":[1,]}`, "", nil, ErrSyntax},
		{"missing colon", `{"a" 1}`, "", nil, ErrSyntax},
		{"single quotes", `{'a':1}`, "", nil, ErrSyntax},
		{"leading zero", `{"a":01}`, "", nil, ErrSyntax},
		{"bare minus", `{"a":-}`, "", nil, ErrSyntax},
		{"dot without digits", `{"a":1.}`, "", nil, ErrSyntax},
		{"exponent without digits", `{"a":1e+}`, "", nil, ErrSyntax},
		{"plus sign", `{"a":+1}`, "", nil, ErrSyntax},
		{"bad literal", `{"a":nul}`, "", nil, ErrSyntax},
		{"literal with suffix", `{"a":truex}`, "", nil, ErrSyntax},
		{"control in string", "{\"a\":\"x\ty\"}", "", nil, ErrSyntax},
		{"control in key", "{\"o\np\":1}", "", nil, ErrSyntax},
		{"bad escape", `{"a":"\x"}`, "", nil, ErrSyntax},
		{"bad escape in key", `{"o\q":1}`, "", nil, ErrSyntax},
		{"bad unicode escape", `{"\u00zz":1}`, "", nil, ErrSyntax},
		{"mismatched brackets", `{"a":[1}`, "", nil, ErrSyntax},
		{"mismatched braces", `{"a":{"b":1]}`, "", nil, ErrSyntax},
		{"array where key expected", `{[1]:2}`, "", nil, ErrSyntax},
		{"NaN", `{"a":NaN}`, "", nil, ErrSyntax},
		{"garbage in removed value", `{"op":[1 2]}`, "", nil, ErrSyntax},
		{"garbage in meta", `{"meta":{"a":x}}`, "", nil, ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := runAll(t, []byte(tt.in), opNames, Options{})
			if tt.err != nil {
				if !errors.Is(got.err, tt.err) {
					t.Fatalf("err = %v, want %v", got.err, tt.err)
				}
				var fe *Error
				if !errors.As(got.err, &fe) || fe.Offset < 0 || fe.Offset > int64(len(tt.in)) {
					t.Fatalf("err %#v has no sane offset", got.err)
				}
				return
			}
			if got.err != nil {
				t.Fatalf("unexpected error %v", got.err)
			}
			if got.out != tt.want {
				t.Fatalf("got  %s\nwant %s", got.out, tt.want)
			}
			if !slices.Equal(got.hidden, tt.hidden) {
				t.Fatalf("hidden = %q, want %q", got.hidden, tt.hidden)
			}
			if !json.Valid([]byte(got.out)) {
				t.Fatalf("output is not valid JSON: %s", got.out)
			}
		})
	}
}

func TestUnescapedMatching(t *testing.T) {
	names := NewNames([]string{"op", "😀x", "é", "\uFFFD", "meta"})
	tests := []struct {
		in, want string
		hidden   []string
	}{
		// A surrogate pair is one rune; encoding/json decodes it so.
		{`{"\ud83d\ude00x":1,"k":2}`, `{"k":2,`, []string{"😀x"}},
		{`{"😀x":1,"k":2}`, `{"k":2,`, []string{"😀x"}},
		{`{"\u00e9":1,"k":2}`, `{"k":2,`, []string{"é"}},
		{`{"\u00E9":1,"k":2}`, `{"k":2,`, []string{"é"}},
		// Lone surrogates, invalid pairs and invalid UTF-8 become U+FFFD.
		{`{"\ud800":1,"k":2}`, `{"k":2,`, []string{"\uFFFD"}},
		{`{"\udc00":1,"k":2}`, `{"k":2,`, []string{"\uFFFD"}},
		{"{\"\xff\":1,\"k\":2}", `{"k":2,`, []string{"\uFFFD"}},
		{"{\"\xed\xa0\x80\":1,\"k\":2}", "{\"\xed\xa0\x80\":1,", nil}, // three invalid bytes: three U+FFFD
		{`{"\ud800\ud800":1,"k":2}`, `{"\ud800\ud800":1,"k":2,`, nil},
		{`{"\ufffd":1,"k":2}`, `{"k":2,`, []string{"\uFFFD"}},
		{`{"\ud83d\ude00":1}`, `{"\ud83d\ude00":1,`, nil},
		{`{"\ud83dx":1}`, `{"\ud83dx":1,`, nil},
		// "meta" is a name: the top-level meta stays, a nested one goes.
		{`{"meta":{"a":1},"x":{"meta":2}}`, `{"x":{},"meta":{"a":1,"authenticated":false,"hiddenFields":["meta"]}}`, []string{"meta"}},
	}
	for _, tt := range tests {
		got := runAll(t, []byte(tt.in), names, Options{})
		if got.err != nil {
			t.Fatalf("%q: %v", tt.in, got.err)
		}
		if !strings.HasPrefix(got.out, tt.want) || !slices.Equal(got.hidden, tt.hidden) {
			t.Errorf("%q: got %q %q, want prefix %q, hidden %q", tt.in, got.out, got.hidden, tt.want, tt.hidden)
		}
	}
}

func TestNames(t *testing.T) {
	n := NewNames([]string{"b", "a", "b", "", "\xff", "a"})
	if n.Len() != 4 {
		t.Fatalf("Len = %d, want 4", n.Len())
	}
	// Invalid UTF-8 in a name can never match a decoded key.
	got := runAll(t, []byte("{\"\xff\":1,\"\":2,\"a\":3,\"b\":4,\"c\":5}"), n, Options{})
	if got.err != nil || got.out != "{\"\xff\":1,\"c\":5,\"meta\":{\"authenticated\":false,\"hiddenFields\":[\"b\",\"a\",\"\"]}}" {
		t.Fatalf("got %q %v", got.out, got.err)
	}
	// No names: only meta.authenticated changes; a nil *Names is the same.
	for _, names := range []*Names{NewNames(nil), nil} {
		got = runAll(t, []byte(`{"op":1,"meta":{"authenticated":false}}`), names, Options{Authenticated: true})
		if got.err != nil || got.out != `{"op":1,"meta":{"authenticated":true}}` || got.hidden != nil {
			t.Fatalf("got %q %q %v", got.out, got.hidden, got.err)
		}
	}
	// Many names use the map lookup.
	var many []string
	for k := range 40 {
		many = append(many, fmt.Sprintf("name%d", k))
	}
	got = runAll(t, []byte(`{"name39":1,"name4":2,"name40":3}`), NewNames(many), Options{})
	if got.err != nil || got.out != `{"name40":3,"meta":{"authenticated":false,"hiddenFields":["name4","name39"]}}` {
		t.Fatalf("got %q %v", got.out, got.err)
	}
}

func TestHiddenFieldsEscaping(t *testing.T) {
	n := NewNames([]string{`a"b`, "<x>", "\u2028"})
	got := runAll(t, []byte(`{"a\"b":1,"<x>":2,"\u2028":3}`), n, Options{})
	want := `{"meta":{"authenticated":false,"hiddenFields":["a\"b","<x>","\u2028"]}}`
	if got.err != nil || got.out != want {
		t.Fatalf("got %s %v, want %s", got.out, got.err, want)
	}
}

func TestDepth(t *testing.T) {
	nest := func(d int) []byte {
		return []byte(`{"a":` + strings.Repeat("[", d-1) + strings.Repeat("]", d-1) + `}`)
	}
	if got := runAll(t, nest(DefaultMaxDepth), opNames, Options{}); got.err != nil {
		t.Fatalf("depth %d: %v", DefaultMaxDepth, got.err)
	}
	if got := runAll(t, nest(DefaultMaxDepth+1), opNames, Options{}); !errors.Is(got.err, ErrDepth) {
		t.Fatalf("depth %d: err %v, want ErrDepth", DefaultMaxDepth+1, got.err)
	}
	if got := runAll(t, []byte(`{"a":{"b":[1]}}`), opNames, Options{MaxDepth: 2}); !errors.Is(got.err, ErrDepth) {
		t.Fatalf("MaxDepth 2: %v", got.err)
	}
	if got := runAll(t, []byte(`{"a":{"b":1}}`), opNames, Options{MaxDepth: 2}); got.err != nil {
		t.Fatalf("MaxDepth 2: %v", got.err)
	}
	if got := runAll(t, []byte(`{"meta":{"a":{}}}`), opNames, Options{MaxDepth: 2}); !errors.Is(got.err, ErrDepth) {
		t.Fatalf("MaxDepth 2 in meta: %v", got.err)
	}

	// 10 million '[' (20 MB of hostile body) fails fast, without recursion.
	deep := bytes.Repeat([]byte("["), 10_000_000)
	if _, _, err := Apply(nil, deep, opNames, Options{}); !errors.Is(err, ErrNotObject) {
		t.Fatalf("bare: %v", err)
	}
	deep = append([]byte(`{"op":`), deep...)
	_, _, err := Apply(nil, deep, opNames, Options{})
	var fe *Error
	if !errors.As(err, &fe) || fe.Kind != ErrDepth || fe.Offset != int64(6+DefaultMaxDepth-1) {
		t.Fatalf("deep: %v", err)
	}
}

func TestMaxMeta(t *testing.T) {
	in := []byte(`{"meta":{"s":"` + strings.Repeat("x", 100) + `"},"a":1}`)
	if got := runAll(t, in, opNames, Options{MaxMeta: 100}); !errors.Is(got.err, ErrMeta) {
		t.Fatalf("err = %v, want ErrMeta", got.err)
	}
	if got := runAll(t, in, opNames, Options{MaxMeta: 200}); got.err != nil {
		t.Fatalf("err = %v", got.err)
	}
	// A meta larger than the default is refused while it streams.
	var out bytes.Buffer
	f := New(&out, opNames, Options{})
	f.Write([]byte(`{"meta":{"s":"`))
	chunk := bytes.Repeat([]byte("x"), 32<<10)
	var err error
	for k := 0; k < 10 && err == nil; k++ {
		_, err = f.Write(chunk)
	}
	if !errors.Is(err, ErrMeta) || len(f.meta) > DefaultMaxMeta+len(chunk) {
		t.Fatalf("err = %v, held %d", err, len(f.meta))
	}
}

// TestHugeKey checks that a key too long to match is neither buffered whole
// nor lost: memory stays bounded by the longest name.
func TestHugeKey(t *testing.T) {
	for _, k := range []string{
		strings.Repeat("o", 1<<20),
		`o\u0070` + strings.Repeat(`\u0070`, 1<<17),
		"op" + strings.Repeat("\\n", 1<<19),
	} {
		for _, ctx := range []string{`{%s}`, `{"x":{%s}}`, `{"meta":{%s}}`} {
			in := []byte(fmt.Sprintf(ctx, `"`+k+`":1,"op":2`))
			var out bytes.Buffer
			f := New(&out, opNames, Options{MaxMeta: 4 << 20})
			for c := range slices.Chunk(in, 1000) {
				if _, err := f.Write(c); err != nil {
					t.Fatal(err)
				}
				if cap(f.held) > 1000 || cap(f.key) > 1000 {
					t.Fatalf("held %d, key %d bytes", cap(f.held), cap(f.key))
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), `"`+k+`":1`) {
				t.Fatalf("huge key lost")
			}
			if got := runAll(t, in, opNames, Options{MaxMeta: 4 << 20}); got.out != out.String() {
				t.Fatalf("chunkings disagree")
			}
		}
	}
}

// TestHeldSpace checks whitespace before an undecided key: kept verbatim when
// short, dropped (whatever the chunking) when long, never held without bound.
func TestHeldSpace(t *testing.T) {
	short := strings.Repeat(" ", maxHeldSpace)
	long := strings.Repeat(" ", 1<<20)
	tests := []struct{ in, want string }{
		{`{"a":1,` + short + `"b":2}`, `{"a":1,` + short + `"b":2,`},
		{`{"a":1,` + long + `"b":2}`, `{"a":1,"b":2,`},
		{`{"op":1,` + long + `"b":2}`, `{"b":2,`},
		{`{` + long + `"b":2}`, `{"b":2,`},
		{`{"x":{` + long + `}}`, `{"x":{},`},
		{`{"x":{` + short + `}}`, `{"x":{` + short + `},`},
	}
	for _, tt := range tests {
		got := runAll(t, []byte(tt.in), opNames, Options{})
		if got.err != nil || !strings.HasPrefix(got.out, tt.want) {
			t.Fatalf("got %.80q %v, want prefix %.80q", got.out, got.err, tt.want)
		}
		var out bytes.Buffer
		f := New(&out, opNames, Options{})
		for c := range slices.Chunk([]byte(tt.in), 4096) {
			f.Write(c)
			if cap(f.held) > 4*maxHeldSpace {
				t.Fatalf("held %d bytes of space", cap(f.held))
			}
		}
	}
}

func TestErrors(t *testing.T) {
	var out bytes.Buffer
	f := New(&out, opNames, Options{})
	_, err := f.Write([]byte(`{"a":1,`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Write([]byte(`"b":x}`))
	var fe *Error
	if !errors.As(err, &fe) || fe.Kind != ErrSyntax || fe.Offset != 11 || !errors.Is(err, ErrSyntax) || errors.Is(err, ErrTruncated) {
		t.Fatalf("err = %#v", err)
	}
	if !strings.Contains(err.Error(), "invalid character 'x' looking for beginning of value") {
		t.Fatalf("message %q", err)
	}
	if _, err2 := f.Write([]byte(`{}`)); err2 != err {
		t.Fatalf("later Write: %v", err2)
	}
	if err2 := f.Close(); err2 != err {
		t.Fatalf("Close: %v", err2)
	}

	f.Reset(&out, opNames, Options{})
	f.Write([]byte(`{"a":[`))
	err = f.Close()
	if !errors.Is(err, ErrTruncated) || !errors.Is(err, ErrSyntax) || !errors.As(err, &fe) || fe.Offset != 6 {
		t.Fatalf("truncated: %v", err)
	}

	out.Reset()
	f.Reset(&out, opNames, Options{})
	f.Write([]byte(`{}`))
	if err := f.Close(); err != nil || f.Close() != nil || out.String() != `{"meta":{"authenticated":false}}` {
		t.Fatalf("second Close: %v, output %s", err, out.String())
	}
	if _, err := f.Write([]byte(` `)); err == nil {
		t.Fatal("Write after Close accepted")
	}

	var zero Filter
	if _, err := zero.Write([]byte(`{}`)); err == nil {
		t.Fatal("zero Filter accepted a Write")
	}
	if err := zero.Close(); err == nil {
		t.Fatal("zero Filter accepted Close")
	}
}

type failWriter struct{ after int }

var errSink = errors.New("sink failed")

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errSink
	}
	w.after--
	return len(p), nil
}

func TestWriterError(t *testing.T) {
	for after := 0; after < 3; after++ {
		f := New(&failWriter{after: after}, opNames, Options{})
		var err error
		for _, c := range []string{`{"a":1,`, `"op":2,"b":`, `3}`} {
			if _, err = f.Write([]byte(c)); err != nil {
				break
			}
		}
		if err == nil {
			err = f.Close()
		}
		if err != errSink {
			t.Fatalf("after %d writes: err %v, want the writer's error as is", after, err)
		}
	}
}

// TestStreams checks that output leaves as soon as it is decided, before the
// document ends, with one dst.Write per chunk when nothing is removed.
func TestStreams(t *testing.T) {
	var out countWriter
	f := New(&out, opNames, Options{})
	f.Write([]byte(`{"data":{"name":"Alex","stat":[1,2`))
	if out.String() != `{"data":{"name":"Alex","stat":[1,2` || out.writes != 1 {
		t.Fatalf("after first chunk: %q in %d writes", out.String(), out.writes)
	}
	f.Write([]byte(`,3],"op":true,"x":`))
	if out.String() != `{"data":{"name":"Alex","stat":[1,2,3],"x":` {
		t.Fatalf("after second chunk: %q", out.String())
	}
	f.Write([]byte(`1}}`))
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if want := `{"data":{"name":"Alex","stat":[1,2,3],"x":1},"meta":{"authenticated":false,"hiddenFields":["op"]}}`; out.String() != want {
		t.Fatalf("got %s", out.String())
	}
}

type countWriter struct {
	bytes.Buffer
	writes int
}

// discardCounter counts what it throws away.
type discardCounter struct{ n int64 }

func (d *discardCounter) Write(p []byte) (int, error) {
	d.n += int64(len(p))
	return len(p), nil
}

func (w *countWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

func TestApplyAppends(t *testing.T) {
	out, hidden, err := Apply([]byte("prefix:"), []byte(`{"op":1}`), opNames, Options{Authenticated: true})
	if err != nil || string(out) != `prefix:{"meta":{"authenticated":true,"hiddenFields":["op"]}}` || !slices.Equal(hidden, []string{"op"}) {
		t.Fatalf("got %s %q %v", out, hidden, err)
	}
}

func TestResetNoAlloc(t *testing.T) {
	doc := fixture.PlayerRecord(false)
	playerNames := NewNames([]string{"op", "banned", "chatplatform", "discord"})
	f := New(io.Discard, playerNames, Options{})
	allocs := testing.AllocsPerRun(20, func() {
		f.Reset(io.Discard, playerNames, Options{})
		for c := range slices.Chunk(doc, 512) {
			f.Write(c)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocs per document", allocs)
	}
}

// repeatReader yields head, then unit repeated count times with commas
// between, then tail, without allocating: a large body that the test does
// not hold in memory.
type repeatReader struct {
	parts [][]byte
	left  int // units still to send
	cur   []byte
	stage int
}

func (r *repeatReader) Read(p []byte) (int, error) {
	for len(r.cur) == 0 {
		switch {
		case r.stage == 0:
			r.cur, r.stage = r.parts[0], 1
		case r.stage == 1 && r.left > 0:
			r.cur = r.parts[1]
			if r.left == 1 {
				r.cur = r.cur[:len(r.cur)-1] // no comma after the last unit
			}
			r.left--
		case r.stage == 1:
			r.cur, r.stage = r.parts[2], 2
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, r.cur)
	r.cur = r.cur[n:]
	return n, nil
}

// TestStreamMemory streams a 64 MB body in 32 KB chunks and checks that the
// filter allocates (almost) nothing while doing it.
func TestStreamMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 64 MB")
	}
	unit := fixture.PlayerRecord(false)
	unit = append(unit[len(`{"ok":true,"data":`):bytes.Index(unit, []byte(`,"meta":`))], ',')
	const size = 64 << 20
	r := &repeatReader{
		parts: [][]byte{[]byte(`{"ok":true,"meta":{"version":"v1"},"data":{"players":[`), unit, []byte(`]}}`)},
		left:  size/len(unit) + 1,
	}
	buf := make([]byte, 32<<10)
	var out discardCounter
	f := New(io.Discard, opNames, Options{})
	f.Write([]byte(`{}`)) // warm up: let the buffers reach their working size
	f.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f.Reset(&out, opNames, Options{})
	total := 0
	for {
		n, err := io.ReadFull(r, buf)
		total += n
		if _, werr := f.Write(buf[:n]); werr != nil {
			t.Fatal(werr)
		}
		if err != nil {
			break
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	inuse := int64(after.HeapInuse) - int64(before.HeapInuse)
	t.Logf("%d MB streamed: %d bytes allocated, heap in use %+d bytes, %d bytes out", total>>20, alloc, inuse, out.n)
	if total < size || alloc > 1<<20 || inuse > 1<<20 {
		t.Fatalf("%d bytes: allocated %d, heap in use %+d", total, alloc, inuse)
	}
	if !slices.Equal(f.Hidden(), []string{"op", "banned", "discord"}) {
		t.Fatalf("hidden %q", f.Hidden())
	}
}
