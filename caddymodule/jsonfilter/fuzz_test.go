package jsonfilter

import (
	"bytes"
	"encoding/json"
	"errors"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

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

// FuzzFilter is a differential test against encoding/json; see checkFilter.
func FuzzFilter(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(checkFilter)
}

// checkFilter is FuzzFilter's property. Whole, byte by byte and in random
// chunks the filter must agree. Input that encoding/json.Valid rejects, or
// that is not an object, must fail. A valid object with at most one top-level
// meta, an object, must come out valid, equal (member order, duplicates and
// number text included) to the input with the names stripped outside meta,
// and meta moved last with hiddenFields and authenticated replaced; any other
// meta must fail with ErrMeta.
func checkFilter(t *testing.T, data []byte) {
	{
		opts := Options{Authenticated: len(data)%2 == 1, MaxMeta: len(data) + 1}
		out, hidden, err := Apply(nil, data, fuzzNames, opts)

		// The same input, in one piece, byte by byte and in random chunks,
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

		trimmed := bytes.TrimLeft(data, " \t\r\n")
		if !json.Valid(data) || trimmed[0] != '{' {
			if err == nil {
				t.Fatalf("accepted input that is not a JSON object: %q -> %q", data, out)
			}
			if errors.Is(err, ErrMeta) && json.Valid(data) {
				t.Fatalf("meta error for a non-object: %v", err)
			}
			return
		}
		want, wantHidden, ok := fixture.Filtered(tree(t, data), fuzzNameList, opts.Authenticated)
		if !ok {
			if !errors.Is(err, ErrMeta) {
				t.Fatalf("ambiguous or non-object meta: err %v, want ErrMeta", err)
			}
			return
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
