package jsonfilter

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/statusgate/statusgate/internal/fieldref"
	"github.com/statusgate/statusgate/internal/fixture"
)

// fuzzNameList is the fixed name set of FuzzFilter: short names the fuzzer
// finds easily, one of them a single letter, one non-ASCII.
var fuzzNameList = []string{"op", "banned", "discord", "a", "é"}

var fuzzNames = NewNames(fuzzNameList)

// fuzzSeeds are added with f.Add; testdata/fuzz/FuzzFilter holds more.
var fuzzSeeds = []string{
	`{"ok":true,"meta":{"version":"v1"},"data":{"op":true,"x":1}}`,
	`{"a":[{"op":1}],"a":[{"op":2}]}`,
	`{"o\u0070":1,"\u00e9":2,"\u00E9":{"a":3},"role":"op"}`,
	`{"meta":{"authenticated":true,"hiddenFields":[1],"op":1},"x":{"banned":[{"discord":null}]}}`,
	`{"a":{"op":1,"b":[1,2`,
	`{"seed":-4172144997902289642,"hp":20.0,"big":1e400}`,
	"\xef\xbb\xbf{}",
	`{"meta":{},"meta":{}}`,
	`{"meta":1}`,
	`[{"op":1}]`,
	"{ \"op\" : 1 ,\n\t\"x\" : { } , \"a\" : [ ] }  \n",
	`{"\ud800":1,"\ud83d\ude00":2,"é":3}`,
}

// tree decodes b, which encoding/json.Valid accepted, into the reference's form.
func tree(t *testing.T, b []byte) fixture.Node {
	t.Helper()
	n, err := fixture.DecodeTree(b)
	if err != nil {
		t.Fatalf("decoding %q: %v", b, err)
	}
	return n
}

// FuzzFilter is a differential test against two references written without
// the filter's scanner: internal/fieldref (gjson and sjson) and
// internal/fixture (encoding/json); see checkFilter.
func FuzzFilter(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkFilter)
}

// fuzzOptions are the options checkFilter uses for data: both values of
// Authenticated, and a small nesting limit for a quarter of the inputs so
// that the depth refusal is fuzzed too; meta is never too large.
func fuzzOptions(data []byte) Options {
	opts := Options{Authenticated: len(data)%2 == 1, MaxDepth: DefaultMaxDepth, MaxMeta: len(data) + 1}
	if len(data)%4 == 0 {
		opts.MaxDepth = 6
	}
	return opts
}

// checkFilter is FuzzFilter's property:
//
//  1. Whole, byte by byte and in random chunks the filter must agree.
//  2. encoding/json.Valid and gjson.Valid must agree on the input; the
//     filter follows them both (RFC 8259).
//  3. Against fieldref, the gjson/sjson field layer, on every input: where
//     it refuses, the filter refuses with the same kind (for invalid input,
//     any kind: the filter reports the first problem it meets, which may be
//     a bad meta or too deep a nesting before the syntax error; for a valid
//     document with two problems, either); where it answers, the filter's
//     output is the same bytes when the input has no blanks between tokens;
//     the same bytes but for the blanks before the document (which sjson
//     drops) when nothing was removed, no meta moved and no blank run is
//     longer than maxHeldSpace; and otherwise the same once blanks are
//     removed from both (where the blanks around a removed member go is each
//     one's own rule). hiddenFields must be the same.
//     Where it cannot express the answer (see the fieldref package comment:
//     a protected member under a duplicated name, a path gjson reads as
//     something else), 4 alone decides.
//  4. Against fixture.Filtered, the encoding/json tree reference, on every
//     valid object with a usable meta: the same content, member order,
//     duplicates and number text included.
func checkFilter(t *testing.T, data []byte) {
	opts := fuzzOptions(data)
	out, hidden, err := Apply(nil, data, fuzzNames, opts)

	// 1. The same input, in one piece, byte by byte and in random chunks,
	// must give the same verdict and the same bytes.
	h := fnv.New64a()
	h.Write(data)
	rng := rand.New(rand.NewPCG(h.Sum64(), 1))
	for name, next := range map[string]func(int) int{
		"write":  func(rest int) int { return rest },
		"bytes":  func(int) int { return 1 },
		"random": func(rest int) int { return 1 + rng.IntN(min(rest, 64)) },
	} {
		got := feed(data, fuzzNames, opts, next)
		if (got.err == nil) != (err == nil) {
			t.Fatalf("%s: err %v, whole: %v", name, got.err, err)
		}
		if err == nil && (got.out != string(out) || !slices.Equal(got.hidden, hidden)) {
			t.Fatalf("%s: output %q, whole %q", name, got.out, out)
		}
	}

	// 2. The validators.
	valid := json.Valid(data)
	if gjson.ValidBytes(data) != valid {
		t.Fatalf("encoding/json.Valid %v, gjson.Valid %v on %q", valid, !valid, data)
	}

	// 3. The gjson/sjson field layer.
	ref, refHidden, refErr := fieldref.Filter(data, fuzzNameList, fieldref.Options{Authenticated: opts.Authenticated, MaxDepth: opts.MaxDepth})
	var cannot *fieldref.Inexpressible
	var refused *fieldref.Refusal
	switch {
	case errors.As(refErr, &cannot):
	case errors.As(refErr, &refused):
		if err == nil {
			t.Fatalf("accepted what the reference refuses (%v): %q -> %q", refErr, data, out)
		}
		if !valid {
			return
		}
		for _, kind := range []struct{ ref, filter error }{
			{fieldref.ErrNotObject, ErrNotObject},
			{fieldref.ErrDepth, ErrDepth},
			{fieldref.ErrMeta, ErrMeta},
		} {
			if errors.Is(err, kind.filter) && errors.Is(refErr, kind.ref) {
				return
			}
		}
		t.Fatalf("%q: filter refused with %v, the reference with %v", data, err, refErr)
	case refErr != nil:
		t.Fatalf("reference failed: %v", refErr)
	default:
		if err != nil {
			t.Fatalf("refused what the reference filters (%s): %q: %v", ref, data, err)
		}
		switch {
		case compact(data) == string(data):
			if string(out) != string(ref) {
				t.Fatalf("input     %q\noutput    %q\nreference %q", data, out, ref)
			}
		case len(refHidden) == 0 && !gjson.GetBytes(data, "meta").Exists() && !hasLongBlank(data):
			// Nothing removed and no meta moved: every blank is the
			// input's on both sides, but for those before the document,
			// which sjson drops.
			if string(bytes.TrimLeft(out, " \t\r\n")) != string(ref) {
				t.Fatalf("input     %q\noutput    %q\nreference %q\n(nothing removed)", data, out, ref)
			}
		case compact(out) != compact(ref):
			t.Fatalf("input     %q\noutput    %q\nreference %q\n(compared without blanks)", data, out, ref)
		}
		if !slices.Equal(hidden, refHidden) {
			t.Fatalf("hidden %q, reference %q", hidden, refHidden)
		}
	}

	// 4. The encoding/json tree reference: every valid object with a usable
	// meta (fieldref refused the others above, and the filter with it).
	if !valid {
		if err == nil {
			t.Fatalf("accepted invalid JSON: %q -> %q", data, out)
		}
		return
	}
	want, wantHidden, ok := fixture.Filtered(tree(t, data), fuzzNameList, opts.Authenticated)
	if !ok {
		t.Fatalf("the encoding/json reference refuses %q, the gjson/sjson one does not", data)
	}
	if err != nil {
		t.Fatalf("valid input %q: %v", data, err)
	}
	if !json.Valid(out) {
		t.Fatalf("invalid output %q from %q", out, data)
	}
	if got := tree(t, out); !reflect.DeepEqual(got, want) {
		t.Fatalf("input  %q\noutput %q: wrong content", data, out)
	}
	if !slices.Equal(hidden, wantHidden) {
		t.Fatalf("hidden %q, want %q", hidden, wantHidden)
	}
}

// hasLongBlank reports a run of whitespace longer than the filter holds
// before a key (maxHeldSpace): one it drops even when nothing is removed.
func hasLongBlank(b []byte) bool {
	run := 0
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			run = 0
		} else if run++; run > maxHeldSpace {
			return true
		}
	}
	return false
}

// compact is the JSON text b without blanks between tokens (gjson's @ugly).
func compact(b []byte) string {
	return gjson.GetBytes(b, "@ugly").Raw
}

// TestFuzzSeedsDecode keeps the fuzz helpers honest on a known case.
func TestFuzzSeedsDecode(t *testing.T) {
	in := []byte(`{"meta":{"authenticated":true,"v":1},"a":2,"x":{"op":1,"é":[{"banned":2}],"k":3}}`)
	want, hidden, ok := fixture.Filtered(tree(t, in), fuzzNameList, false)
	out, gotHidden, err := Apply(nil, in, fuzzNames, Options{})
	if !ok || err != nil || !reflect.DeepEqual(tree(t, out), want) || !reflect.DeepEqual(hidden, gotHidden) {
		t.Fatalf("%s %q %v", out, gotHidden, err)
	}
	if string(out) != `{"x":{"k":3},"meta":{"v":1,"authenticated":false,"hiddenFields":["op","a","é"]}}` {
		t.Fatalf("got %s", out)
	}
}

// FuzzFilterDoc checks the same property (checkFilter) on documents built
// from the input rather than on the input itself: byte mutations of JSON
// text rarely stay valid, so FuzzFilter compares few of its inputs with the
// references' answers, while every input here is read as a recipe for a
// valid object (see docBuilder) whose members are drawn from the protected
// names in every spelling, near misses, meta and its own members, names with
// gjson and sjson path syntax, duplicates and blanks.
func FuzzFilterDoc(f *testing.F) {
	for _, s := range []string{
		"",
		"\x04\x00\x01\x02\x00\x0b\x03\x01",
		"\x03\x05\x01\x00\x00\x0c\x01\x03\x00\x09\x00\x00\x02\x01\x04",
		"\x05\x0b\x00\x06\x00\x00\x0b\x00\x01\x0b\x02\x00\x00\x00\x0b\x00\x03",
		"\x06\x03\x02\x10\x01\x01\x03\x00\x04\x00\x00\x08\x20\x00\x01\x02\x03\x04\x05\x06",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, recipe []byte) {
		checkFilter(t, buildDoc(recipe))
	})
}

// docKeys are the member names buildDoc draws from, as JSON text.
var docKeys = []string{
	`"op"`, `"banned"`, `"discord"`, `"a"`, `"é"`, // protected
	`"o\u0070"`, `"\u00e9"`, `"\u00E9"`, `"\u0061"`, `"ban\u006eed"`, // protected, escaped
	`"meta"`, `"m\u0065ta"`, `"hiddenFields"`, `"authenticated"`, `"authenticat\u0065d"`,
	`"opx"`, `"OP"`, `"op "`, `"e\u0301"`, `"\u00c9"`, `"aa"`, `"data"`, `"x"`, // near misses, plain
	`""`, `"a.b"`, `":x"`, `"#"`, `"@this"`, `"-1"`, `"0"`, `"\\"`, `"\""`, `"*"`, `"!"`, `"|"`, // path syntax
	`"\ud800"`, `"\ud83d\ude00"`, "\"\xff\"", `"\ud800\u0061"`, // surrogates, invalid UTF-8
}

// docScalars are the scalar values buildDoc draws from.
var docScalars = []string{
	`"op"`, `"a"`, `"o\u0070"`, `""`, `"{\"op\":1}"`, "\"\xc3\"",
	`0`, `-4172144997902289642`, `20.0`, `1e400`, `-0.5E+3`, `true`, `false`, `null`,
}

// docBlanks are the runs of whitespace buildDoc puts between tokens; the last
// two are as long as the filter holds before a key (maxHeldSpace), and one
// byte longer.
var docBlanks = []string{"", "", "", "", " ", "\n\t", "\r\n  ", strings.Repeat(" ", maxHeldSpace), strings.Repeat("\t", maxHeldSpace+1)}

// docBuilder reads a recipe one byte per decision; past its end every
// decision is 0, which ends every container.
type docBuilder struct {
	recipe []byte
	out    []byte
}

func (b *docBuilder) next() int {
	if len(b.recipe) == 0 {
		return 0
	}
	c := b.recipe[0]
	b.recipe = b.recipe[1:]
	return int(c)
}

// blank writes a run of whitespace when the recipe's byte asks for one.
func (b *docBuilder) blank() {
	b.out = append(b.out, docBlanks[b.next()%len(docBlanks)]...)
}

// buildDoc makes a valid JSON object from recipe: a top-level object whose
// members and values the recipe chooses, at most eight levels deep.
func buildDoc(recipe []byte) []byte {
	b := &docBuilder{recipe: recipe}
	b.blank()
	b.object(1)
	b.blank()
	return b.out
}

func (b *docBuilder) object(depth int) {
	b.list('{', '}', 6, func() {
		b.out = append(b.out, docKeys[b.next()%len(docKeys)]...)
		b.blank()
		b.out = append(b.out, ':')
		b.blank()
		b.value(depth)
	})
}

func (b *docBuilder) value(depth int) {
	c := b.next()
	switch {
	case depth < 8 && c%4 == 1:
		b.object(depth + 1)
	case depth < 8 && c%4 == 2:
		b.list('[', ']', 4, func() { b.value(depth + 1) })
	default:
		b.out = append(b.out, docScalars[(c/4)%len(docScalars)]...)
	}
}

// list writes a container: open, fewer than most elements (as many as the
// recipe says), each written by elem between blanks and after a comma, and
// close.
func (b *docBuilder) list(open, close byte, most int, elem func()) {
	b.out = append(b.out, open)
	n := b.next() % most
	for i := range n {
		if i > 0 {
			b.out = append(b.out, ',')
		}
		b.blank()
		elem()
		b.blank()
	}
	if n == 0 {
		b.blank()
	}
	b.out = append(b.out, close)
}
