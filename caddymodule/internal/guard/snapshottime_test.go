package guard

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// snapshotTimeDecode is snapshotTime as it was before it read the one member
// with gjson: the whole body decoded with encoding/json. TestSnapshotTime
// holds the two to the same answers, BenchmarkSnapshotTime measures both.
func snapshotTimeDecode(body []byte) (time.Time, bool) {
	var doc struct {
		Meta struct {
			CachedAt *int64 `json:"cachedAt"`
		} `json:"meta"`
	}
	if json.Unmarshal(body, &doc) != nil || doc.Meta.CachedAt == nil {
		return time.Time{}, false
	}
	return time.UnixMilli(*doc.Meta.CachedAt), true
}

// TestSnapshotTime checks which meta.cachedAt counts as a snapshot time: a
// JSON integer of milliseconds, wherever meta stands and however large the
// body; not a missing, null, fractional, exponent, string or out-of-range
// one, nor one outside the top-level meta object. Where the old decoder
// agrees (every valid body here spelled as the backend spells it), both must
// give the same answer.
func TestSnapshotTime(t *testing.T) {
	const at, none = 1784300000000, math.MinInt64
	big := `{"ok":true,"data":{"history":[` + strings.Repeat(`{"t":1784299990000,"online":["a","b"],"meta":{"cachedAt":1}},`, 2000) +
		`{}]},"meta":{"version":"v1","cachedAt":1784300000000}}`
	for _, tc := range []struct {
		name string
		body string
		want int64 // milliseconds, or none
		same bool  // the old decoder gives the same answer
	}{
		{"meta last", `{"ok":true,"data":{"online":[]},"meta":{"authenticated":true,"cachedAt":1784300000000}}`, at, true},
		{"meta first", `{"meta":{"cachedAt":1784300000000},"data":{"x":[1,2,{"cachedAt":5}]}}`, at, true},
		{"spaces", " {\n \"meta\" : { \"cachedAt\" :\t1784300000000 } }\n", at, true},
		{"escaped member names", `{"m\u0065ta":{"cached\u0041t":1784300000000}}`, at, true},
		{"negative", `{"meta":{"cachedAt":-5}}`, -5, true},
		{"zero", `{"meta":{"cachedAt":0}}`, 0, true},
		{"int64 max", `{"meta":{"cachedAt":9223372036854775807}}`, 9223372036854775807, true},
		{"large body, nested metas skipped", big, at, true},
		{"no cachedAt", `{"ok":true,"meta":{}}`, none, true},
		{"no meta", `{"ok":true,"data":{}}`, none, true},
		{"cachedAt null", `{"meta":{"cachedAt":null}}`, none, true},
		{"meta null", `{"meta":null}`, none, true},
		{"fraction", `{"meta":{"cachedAt":1784300000000.5}}`, none, true},
		{"integral fraction", `{"meta":{"cachedAt":1784300000000.0}}`, none, true},
		{"exponent", `{"meta":{"cachedAt":1.7843e12}}`, none, true},
		{"string", `{"meta":{"cachedAt":"1784300000000"}}`, none, true},
		{"bool", `{"meta":{"cachedAt":true}}`, none, true},
		{"object", `{"meta":{"cachedAt":{"ms":1}}}`, none, true},
		{"beyond int64", `{"meta":{"cachedAt":9223372036854775808}}`, none, true},
		{"meta not an object", `{"meta":[{"cachedAt":1}]}`, none, true},
		{"nested only", `{"data":{"meta":{"cachedAt":1784300000000}}}`, none, true},
		{"array at the top", `[{"meta":{"cachedAt":1784300000000}}]`, none, true},
		{"not JSON", `<html>cachedAt</html>`, none, true},
		{"empty", ``, none, true},
		// Not JSON numbers: gjson reads them as numbers, the check of the
		// literal refuses them, as the old decoder refused the body.
		{"plus sign", `{"meta":{"cachedAt":+1784300000000}}`, none, true},
		{"leading zero", `{"meta":{"cachedAt":01784300000000}}`, none, true},
		{"NaN", `{"meta":{"cachedAt":NaN}}`, none, true},
		// Where the two differ by design: gjson matches the backend's
		// spelling exactly and takes the first of duplicate members, and it
		// does not validate what lies after the member it reads.
		{"other case", `{"Meta":{"CachedAt":1784300000000}}`, none, false},
		{"duplicate", `{"meta":{"cachedAt":1784300000000,"cachedAt":5}}`, at, false},
		{"broken after meta", `{"meta":{"cachedAt":1784300000000},"data":[`, at, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := SnapshotTime([]byte(tc.body))
			if tc.want == none {
				if ok {
					t.Errorf("snapshot time %d, want none", got.UnixMilli())
				}
			} else if !ok || got.UnixMilli() != tc.want {
				t.Errorf("snapshot time %d %v, want %d", got.UnixMilli(), ok, tc.want)
			}
			old, oldOK := snapshotTimeDecode([]byte(tc.body))
			if agree := ok == oldOK && (!ok || got.Equal(old)); agree != tc.same {
				t.Errorf("gjson %v %v, encoding/json %v %v: agreement %v, want %v", got, ok, old, oldOK, agree, tc.same)
			}
		})
	}
}

// snapshotBody is a status answer of the shape the plugin sends (meta last),
// with n entries of history.
func snapshotBody(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"ok":true,"data":{"online":["40094f2f-ca8f-4826-8b31-11e0f4c449df"],"count":1,"history":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"t":%d,"online":["40094f2f-ca8f-4826-8b31-11e0f4c449df","7d9a1c1e-0d1f-4a8e-9e9b-0a3c2f1e4b5d"],"count":2}`, 1784300000000-int64(i)*5000)
	}
	b.WriteString(`]},"meta":{"version":"v1","server":"global","updatedAt":1784300000123,"cachedAt":1784300000000,"authenticated":true}}`)
	return []byte(b.String())
}

// BenchmarkSnapshotTime compares reading meta.cachedAt with gjson to decoding
// the body with encoding/json, on a status answer without history (about
// 200 bytes) and with 100 and 2,000 entries of it (12 KB, 240 KB).
func BenchmarkSnapshotTime(b *testing.B) {
	for _, n := range []int{0, 100, 2000} {
		body := snapshotBody(n)
		for _, impl := range []struct {
			name string
			fn   func([]byte) (time.Time, bool)
		}{{"gjson", SnapshotTime}, {"decode", snapshotTimeDecode}} {
			b.Run(fmt.Sprintf("%s/%dB", impl.name, len(body)), func(b *testing.B) {
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					if _, ok := impl.fn(body); !ok {
						b.Fatal("no snapshot time")
					}
				}
			})
		}
	}
}

// TestSnapshotTimeDeep: a body nested as deep as max_response allows is read
// in one pass without recursion (gjson.Get skips what is off the path;
// gjson.Valid would recurse once per level, and a stack overflow is fatal to
// the whole process), also when the nesting is on the path to cachedAt.
func TestSnapshotTimeDeep(t *testing.T) {
	const size = 4 << 20 // max_response's default
	for _, body := range []string{
		strings.Repeat("[", size),
		`{"data":` + strings.Repeat(`{"a":`, size/5),
		`{"meta":{"cachedAt":` + strings.Repeat("[", size),
		strings.Repeat(`{"meta":`, size/8),
	} {
		if _, ok := SnapshotTime([]byte(body)); ok {
			t.Errorf("a snapshot time in %.20s…", body)
		}
	}
}
