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

// node is a JSON value decoded with every member kept, in order, duplicates
// included, numbers as their literal text: what the filter must preserve.
type node struct {
	obj    []member
	arr    []node
	scalar any // json.Number, string, bool or nil
	kind   byte
}

type member struct {
	key string
	val node
}

// parseTree decodes one value from d (which must be known-valid JSON).
func parseTree(d *json.Decoder) node {
	tok, err := d.Token()
	if err != nil {
		panic(err)
	}
	switch tok {
	case json.Delim('{'):
		n := node{kind: '{', obj: []member{}}
		for d.More() {
			k, _ := d.Token()
			n.obj = append(n.obj, member{k.(string), parseTree(d)})
		}
		d.Token()
		return n
	case json.Delim('['):
		n := node{kind: '[', arr: []node{}}
		for d.More() {
			n.arr = append(n.arr, parseTree(d))
		}
		d.Token()
		return n
	}
	return node{scalar: tok}
}

func decodeTree(b []byte) node {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	return parseTree(d)
}

// strip removes names everywhere in n, recording those it removed; it does
// not look inside removed values, just as the filter does not.
func strip(n node, names map[string]bool, found map[string]bool) node {
	switch n.kind {
	case '{':
		out := node{kind: '{', obj: []member{}}
		for _, m := range n.obj {
			if names[m.key] {
				found[m.key] = true
				continue
			}
			out.obj = append(out.obj, member{m.key, strip(m.val, names, found)})
		}
		return out
	case '[':
		out := node{kind: '[', arr: []node{}}
		for _, v := range n.arr {
			out.arr = append(out.arr, strip(v, names, found))
		}
		return out
	}
	return n
}

// expected is the reference result for a top-level object: names stripped
// outside meta, meta moved last with authenticated and hiddenFields replaced.
// ok is false when the filter must refuse the document.
func expected(in node, nameList []string, auth bool) (want node, hidden []string, ok bool) {
	names := map[string]bool{}
	for _, s := range nameList {
		names[s] = true
	}
	found := map[string]bool{}
	want = node{kind: '{', obj: []member{}}
	meta := node{kind: '{', obj: []member{}}
	metas := 0
	for _, m := range in.obj {
		switch {
		case m.key == "meta":
			metas++
			meta = m.val
		case names[m.key]:
			found[m.key] = true
		default:
			want.obj = append(want.obj, member{m.key, strip(m.val, names, found)})
		}
	}
	if metas > 1 || meta.kind != '{' {
		return node{}, nil, false
	}
	newMeta := node{kind: '{', obj: []member{}}
	for _, m := range meta.obj {
		if m.key != "hiddenFields" && m.key != "authenticated" {
			newMeta.obj = append(newMeta.obj, m)
		}
	}
	for _, s := range nameList {
		if found[s] {
			hidden = append(hidden, s)
		}
	}
	newMeta.obj = append(newMeta.obj, member{"authenticated", node{scalar: auth}})
	if len(hidden) > 0 {
		list := node{kind: '[', arr: []node{}}
		for _, s := range hidden {
			list.arr = append(list.arr, node{scalar: s})
		}
		newMeta.obj = append(newMeta.obj, member{"hiddenFields", list})
	}
	want.obj = append(want.obj, member{"meta", newMeta})
	return want, hidden, true
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
		want, wantHidden, ok := expected(decodeTree(data), fuzzNameList, opts.Authenticated)
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
		if got := decodeTree(out); !reflect.DeepEqual(got, want) {
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
	want, hidden, ok := expected(decodeTree(in), fuzzNameList, false)
	out, gotHidden, err := Apply(nil, in, fuzzNames, Options{})
	if !ok || err != nil || !reflect.DeepEqual(decodeTree(out), want) || !reflect.DeepEqual(hidden, gotHidden) {
		t.Fatalf("%s %q %v", out, gotHidden, err)
	}
	if string(out) != `{"x":{"k":3},"meta":{"v":1,"authenticated":false,"hiddenFields":["op","a","é"]}}` {
		t.Fatalf("got %s", out)
	}
}
