package gateway

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// The query is the endpoint's (docs/request.md, "What the backend gets"):
// only what a built-in endpoint reads reaches the backend and names the
// cache entry, the shared trip and the stream's topic.

// TestQueryJunkJoinsThePlainEntry: many plain GETs of /status, each with a
// query status does not read (?c=<random>), cost one trip per class, the
// plain one's: each gets the plain answer, from the same cache entry; so do
// streams of such queries, whose topic is the plain one's. The
// flag status reads counts in any spelling the backend reads, and reaches
// it spelled once.
func TestQueryJunkJoinsThePlainEntry(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{"key " + KeyA, "max_per_client off", "cache status 1h"}}.Start(t)
	const status = "/api/v1/status"
	WantFiltered(t, Send(t, "GET", status), status)
	WantBackendBytes(t, Send(t, "GET", status, WithKey(KeyA)), status)
	be.WantSeen(t, "the plain GETs", status, status)
	for i := range 20 {
		junk := fmt.Sprintf("%s?c=%d&key=%s", status, rand.Uint64(), KeyB)
		if i%2 == 0 {
			WantFiltered(t, Send(t, "GET", junk), status)
		} else {
			WantBackendBytes(t, Send(t, "GET", junk, WithKey(KeyA)), status)
		}
	}
	be.WantSeen(t, "20 GETs with a query status does not read: the plain entry")
	plain := Send(t, "GET", status)
	for range 4 {
		s := OpenLive(t, nil, fmt.Sprintf("%s?c=%d", status, rand.Uint64()))
		s.WantStream(t, "a stream with a query status does not read")
		if ev := s.NextEvent(t); ev.Data != string(plain.Body) {
			t.Errorf("the stream's first event\n%s\nthe plain GET's answer\n%s", ev.Data, plain.Body)
		}
		s.Close()
	}
	be.WantSeen(t, "streams with a query status does not read: the plain topic and entry")

	const history = status + "?history=true"
	WantFiltered(t, Send(t, "GET", status+"?c=1&history%3Dtrue&history=false"), history)
	be.WantSeen(t, "history, spelled as the backend reads it", history)
	for _, q := range []string{"?history=true", "?c=2&history=true", "?x=%26history=true", "?%68istory=true&d"} {
		WantFiltered(t, Send(t, "GET", status+q), history)
	}
	be.WantSeen(t, "history in four more spellings: its one entry")
	WantFiltered(t, Send(t, "GET", status+"?history=TRUE&History=true&history"), status)
	be.WantSeen(t, "spellings the backend does not read as history: the plain entry")
}

// TestQueryWhatReachesTheBackend: each endpoint's query reaches the backend
// as it reads it, and nothing else: a flag once, of several pairs of a
// parameter the last as written, never the key; a custom station's whole
// query but the key.
func TestQueryWhatReachesTheBackend(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be, "enable custom/votes")
	for _, c := range []struct{ target, want string }{
		{"/api/v1/player/" + Alex + "?n=1&detailed=true&detailed=false", "/api/v1/player/" + Alex + "?detailed=true"},
		{"/api/v1/player/" + Alex + "?detailed%3Dtrue", "/api/v1/player/" + Alex + "?detailed=true"},
		{"/api/v1/player/" + Alex + "?Detailed=true&history=true", "/api/v1/player/" + Alex},
		{"/api/v1/server?n=1&key=" + KeyB + "&history=true", "/api/v1/server"},
		{"/api/v1/punishments?view=html&c=1", "/api/v1/punishments?view=html"},
		{"/api/v1/placeholders?c=1&p=%25a%25&uuid=" + Alex + "&p=%25b%25&P=x&UUID=y&key=" + KeyB, "/api/v1/placeholders?uuid=" + Alex + "&p=%25b%25"},
		{"/api/v1/placeholders?%70=x&uuid=" + Alex + "&list=true", "/api/v1/placeholders?uuid=" + Alex + "&%70=x&list=true"},
		{"/api/v1/custom/votes?page=2&k%65y=" + KeyB + "&c=%41", "/api/v1/custom/votes?page=2&c=%41"},
	} {
		if r := Send(t, "GET", c.target, WithKey(KeyA)); r.Status != 200 {
			t.Errorf("%s: %d %s", c.target, r.Status, Clip(r.Body))
		}
		be.WantSeen(t, c.target, c.want)
	}
	// The answer is the one the backend gives to what it got.
	r := Send(t, "GET", "/api/v1/placeholders?p=first&uuid="+Alex+"&p=second", WithKey(KeyA))
	if !strings.Contains(string(r.Body), `"second":"Alex_MC"`) || strings.Contains(string(r.Body), "first") {
		t.Errorf("placeholders with two p: %s, want the last one's answer", r.Body)
	}
}
