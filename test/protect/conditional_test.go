package protect

import (
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// honouringBackend answers like the plugin, and also honours what the plugin
// does not: a Range gets a 206 of the bytes asked for, an If-None-Match of
// its ETag a 304. It records every Range and conditional header it gets.
type honouringBackend struct {
	srv  *httptest.Server
	mu   sync.Mutex
	seen []string // "Name: value" of each such header
	n    int
}

func newHonouringBackend(t *testing.T) *honouringBackend {
	hb := &honouringBackend{}
	hb.srv = httptest.NewServer(hb)
	t.Cleanup(hb.srv.Close)
	return hb
}

func (hb *honouringBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hb.mu.Lock()
	hb.n++
	for _, name := range []string{"Range", "If-Range", "If-None-Match", "If-Modified-Since", "If-Match", "If-Unmodified-Since"} {
		if v := r.Header.Get(name); v != "" {
			hb.seen = append(hb.seen, name+": "+v)
		}
	}
	hb.mu.Unlock()
	status, body := BackendResponse(r.URL)
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("ETag", `"v1"`)
	switch {
	case r.Header.Get("If-None-Match") == `"v1"`:
		w.WriteHeader(http.StatusNotModified)
	case strings.HasPrefix(r.Header.Get("Range"), "bytes=0-9"):
		w.Header().Set("Content-Range", "bytes 0-9/"+strconv.Itoa(len(body)))
		w.WriteHeader(http.StatusPartialContent)
		_, _ = w.Write(body[:10])
	default:
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}
}

// TestConditionalRequestsNotShared: a scoped bot's
// Range and If-None-Match never reach the backend, and leave every other
// caller, keyed or not, of a cached endpoint and of a coalesced one, a 200
// with the whole body.
func TestConditionalRequestsNotShared(t *testing.T) { Forms(t, testConditionalRequestsNotShared) }

func testConditionalRequestsNotShared(t *testing.T, legacy bool) {
	hb := newHonouringBackend(t)
	Gateway{Upstream: hb.srv.Listener.Addr().String(), Legacy: legacy, Shared: true, Statusgate: []string{
		"key staff " + KeyA,
		"key bot " + KeyB + " {\n\t\t\tendpoints worlds status\n\t\t}",
		"max_per_client off",
	}}.Start(t)
	whole := func(who string, r Response, target string, keyed bool) {
		t.Helper()
		u, err := url.Parse(target)
		if err != nil {
			t.Fatal(err)
		}
		_, want := BackendResponse(u)
		if r.Status != 200 {
			t.Fatalf("%s: %d %s, want 200 and the whole answer", who, r.Status, Clip(r.Body))
		}
		if keyed && string(r.Body) != string(want) {
			t.Fatalf("%s: %d bytes %s, want the backend's whole %d", who, len(r.Body), Clip(r.Body), len(want))
		}
		if !keyed && len(r.Body) < 100 {
			t.Fatalf("%s: %d bytes %s, want the whole filtered answer", who, len(r.Body), Clip(r.Body))
		}
	}
	// /worlds is cached (30 s): the bot's Range first.
	whole("the bot's Range", Send(t, "GET", "/api/v1/worlds", WithKey(KeyB), "Range: bytes=0-9"), "/api/v1/worlds", true)
	whole("staff after it", Send(t, "GET", "/api/v1/worlds", WithKey(KeyA)), "/api/v1/worlds", true)
	// /status: the bot's validator, then everyone.
	whole("the bot's If-None-Match", Send(t, "GET", "/api/v1/status", WithKey(KeyB), `If-None-Match: "v1"`), "/api/v1/status", true)
	whole("staff after it", Send(t, "GET", "/api/v1/status", WithKey(KeyA)), "/api/v1/status", true)
	whole("anonymous after it", Send(t, "GET", "/api/v1/status"), "/api/v1/status", false)
	// /player is not cached but coalesced: the bot's conditional requests
	// beside other callers' plain ones.
	target := "/api/v1/player/" + Alex
	out := concurrently(t, 6, func(i int) Response {
		switch i {
		case 0:
			return Send(t, "GET", target, WithKey(KeyB), "Range: bytes=0-9")
		case 1:
			return Send(t, "GET", target, WithKey(KeyB), `If-None-Match: "v1"`, "If-Modified-Since: Mon, 01 Jan 2024 00:00:00 GMT")
		case 2, 3:
			return Send(t, "GET", target, WithKey(KeyA))
		default:
			return Send(t, "GET", target)
		}
	})
	for i, r := range out {
		// The bot's key does not open player: it is an anonymous caller there.
		whole("player caller "+strconv.Itoa(i), r, target, i == 2 || i == 3)
	}
	hb.mu.Lock()
	defer hb.mu.Unlock()
	if len(hb.seen) != 0 {
		t.Errorf("the backend got %q", hb.seen)
	}
}
