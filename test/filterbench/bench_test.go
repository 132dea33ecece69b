// Package filterbench measures the field filter against the alternatives
// it replaces: gjson.ValidBytes (validation alone, the reference) and an
// encoding/json decode-delete-encode round trip. It lives in the test module
// beside the other harnesses.
//
//	go test -run=^$ -bench=. -benchmem -count=5 ./test/filterbench/
package filterbench

import (
	"encoding/json"
	"io"
	"testing"

	"github.com/tidwall/gjson"

	"github.com/statusgate/statusgate/caddymodule/jsonfilter"
	"github.com/statusgate/statusgate/internal/fixture"
)

// benchFields is the player station's protected list, as the measurements
// the project started from used.
var benchFields = []string{"op", "banned", "chatplatform", "discord"}

var benchNames = jsonfilter.NewNames(benchFields)

var benchDocs = []struct {
	name string
	doc  []byte
}{
	{"2KB", fixture.PlayerRecord(false)},
	{"200KB", fixture.PlayerRecord(true)},
	{"2MB", fixture.PlayerEnvelope(80, 1000)},
}

func TestBenchDocs(t *testing.T) {
	for _, d := range benchDocs {
		if !gjson.ValidBytes(d.doc) {
			t.Fatalf("%s is not valid", d.name)
		}
		out, hidden, err := jsonfilter.Apply(nil, d.doc, benchNames, jsonfilter.Options{})
		if err != nil || len(hidden) != 3 || !gjson.ValidBytes(out) {
			t.Fatalf("%s: %v %q", d.name, err, hidden)
		}
		t.Logf("%s: %d bytes", d.name, len(d.doc))
	}
}

// BenchmarkFilter streams each record through a reused Filter in 32 KB
// chunks, as the gateway does, to io.Discard.
func BenchmarkFilter(b *testing.B) {
	for _, d := range benchDocs {
		b.Run(d.name, func(b *testing.B) {
			f := jsonfilter.New(io.Discard, benchNames, jsonfilter.Options{})
			b.SetBytes(int64(len(d.doc)))
			b.ReportAllocs()
			for b.Loop() {
				f.Reset(io.Discard, benchNames, jsonfilter.Options{})
				for p := d.doc; len(p) > 0; {
					k := min(len(p), 32<<10)
					if _, err := f.Write(p[:k]); err != nil {
						b.Fatal(err)
					}
					p = p[k:]
				}
				if err := f.Close(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkValidate is the reference: gjson.ValidBytes on the same bytes.
func BenchmarkValidate(b *testing.B) {
	for _, d := range benchDocs {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(d.doc)))
			b.ReportAllocs()
			for b.Loop() {
				if !gjson.ValidBytes(d.doc) {
					b.Fatal("invalid")
				}
			}
		})
	}
}

// BenchmarkRoundTrip is what the filter replaces: decode into Go values with
// encoding/json, delete the names at any depth, encode again. It is here for
// comparison only (it also rewrites numbers and reorders keys, which the filter must not).
func BenchmarkRoundTrip(b *testing.B) {
	var strip func(v any)
	strip = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for _, n := range benchFields {
				delete(v, n)
			}
			for _, e := range v {
				strip(e)
			}
		case []any:
			for _, e := range v {
				strip(e)
			}
		}
	}
	for _, d := range benchDocs {
		b.Run(d.name, func(b *testing.B) {
			b.SetBytes(int64(len(d.doc)))
			b.ReportAllocs()
			for b.Loop() {
				var v any
				if err := json.Unmarshal(d.doc, &v); err != nil {
					b.Fatal(err)
				}
				strip(v)
				if _, err := json.Marshal(v); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
