package caddymodule

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statusgate/statusgate/caddymodule/apikey"
)

// TestBoundedWork checks the bounds that keep the work before the route
// decides the same for every path: a path under /api longer than
// maxPathLength is a 404 whatever it names, and a key longer than
// apikey.MaxSecretLength is no key. Just inside both, requests work.
func TestBoundedWork(t *testing.T) {
	longest := strings.Repeat("K7", apikey.MaxSecretLength/2)
	h, _ := newTestHandler(t, "key "+longest)
	world := func(n int) string { return "/api/v1/worlds/" + strings.Repeat("w", n) }
	atBound := maxPathLength - len("/v1/worlds/")
	for _, c := range []struct {
		target string
		key    string
		status int
		upURI  string // what reached the backend; "" for nothing
	}{
		{world(atBound), longest, 200, world(atBound)},
		{world(atBound + 1), longest, 404, ""},
		{"/api/worlds/" + strings.Repeat("w", atBound+4), longest, 404, ""},           // the alias is bounded as written
		{"/api/v1/bans?x=" + strings.Repeat("q", 4096), longest, 200, "/api/v1/bans"}, // a query bans does not read
		{"/api/v1/bans", longest, 200, "/api/v1/bans"},
		{"/api/v1/bans", " \t" + longest + " ", 200, "/api/v1/bans"}, // trimmed first, as ever
		{"/api/v1/bans", longest + "K", 404, ""},
		{"/api/v1/bans", strings.Repeat("K", 20_000), 404, ""},
		{"/api/v1/status", longest + "K", 200, "/api/v1/status"}, // public: an unknown key is no key
	} {
		be := &backend{body: `{"ok":true,"meta":{}}`}
		got := serve(t, h, be, "GET", c.target, keyHeader(c.key))
		what := fmt.Sprintf("%.40s… (%d bytes), key of %d bytes", c.target, len(c.target), len(c.key))
		if got.Code != c.status {
			t.Errorf("%s: status %d, want %d", what, got.Code, c.status)
		}
		switch {
		case c.upURI == "" && len(be.calls) != 0:
			t.Errorf("%s: reached the backend", what)
		case c.upURI != "" && (len(be.calls) != 1 || be.calls[0].RequestURI != c.upURI):
			t.Errorf("%s: the backend got %d calls, want %.40s…", what, len(be.calls), c.upURI)
		}
	}
}

// BenchmarkDisguiseTiming times the gateway's 404 for pairs of requests
// through ServeHTTP: a disguised one (an enabled protected endpoint without
// an accepted key, or one with a parameter) against the genuine one of an
// unknown path, with a 20 000-character key or parameter, and two unknown
// paths as the noise floor. The two requests of a pair alternate, each timed
// alone; it reports each side's median and the difference of the medians
// (diff-ns), which is what a caller could measure from outside:
//
//	go test ./caddymodule -run '^$' -bench DisguiseTiming -benchtime 3600x -count 5
//
// The timing is a benchmark, not a test: a machine under load makes any
// threshold flaky.
func BenchmarkDisguiseTiming(b *testing.B) {
	long := strings.Repeat("a", 20_000)
	longKey := http.Header{"X-Api-Key": {long}}
	// The longest parameter the gateway still parses: what is left of the
	// difference at the bound.
	bounded := strings.Repeat("a", maxPathLength-len("/v1/worlds/"))
	for _, c := range []struct {
		name      string
		a, b      string // the disguised path and the unknown one
		header    http.Header
		queryKeys bool
	}{
		{name: "unknown-vs-unknown", a: "/api/v1/nothing", b: "/api/v1/nothinh"},
		{name: "unknown-vs-unknown/long-key", a: "/api/v1/nothing", b: "/api/v1/nothinh", header: longKey},
		{name: "hidden-vs-unknown/long-key", a: "/api/v1/bans", b: "/api/v1/nothing", header: longKey},
		{name: "unknown-vs-unknown/long-param", a: "/api/v1/nothing/" + long, b: "/api/v1/nothinh/" + long},
		{name: "hidden-vs-unknown/long-param", a: "/api/v1/worlds/" + long, b: "/api/v1/nothing/" + long},
		{name: "hidden-vs-unknown/param-at-bound", a: "/api/v1/worlds/" + bounded, b: "/api/v1/nothing/" + bounded},
	} {
		b.Run(c.name, func(b *testing.B) {
			h, _ := newTestHandler(b, "key "+testKey)
			next := &backend{}
			var ta, tb []time.Duration
			for i := range b.N {
				da, db := timeServe(h, next, c.a, c.header), timeServe(h, next, c.b, c.header)
				if i%2 == 1 { // alternate who goes first
					db, da = timeServe(h, next, c.b, c.header), timeServe(h, next, c.a, c.header)
				}
				ta, tb = append(ta, da), append(tb, db)
			}
			if len(next.calls) != 0 {
				b.Fatalf("%d requests reached the backend", len(next.calls))
			}
			ma, mb := median(ta), median(tb)
			b.ReportMetric(float64(ma.Nanoseconds()), "a-ns")
			b.ReportMetric(float64(mb.Nanoseconds()), "b-ns")
			b.ReportMetric(float64((ma - mb).Nanoseconds()), "diff-ns")
		})
	}
}

// timeServe times one ServeHTTP of a GET for target; the request is built
// before the clock starts.
func timeServe(h *Handler, next *backend, target string, header http.Header) time.Duration {
	r, _ := newRequest("GET", target)
	for k, v := range header {
		r.Header[k] = v
	}
	rec := httptest.NewRecorder()
	start := time.Now()
	_ = h.ServeHTTP(rec, r, next)
	d := time.Since(start)
	if rec.Code != http.StatusNotFound {
		panic(fmt.Sprintf("%s: status %d, want 404", target, rec.Code))
	}
	return d
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}
