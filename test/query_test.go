package test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
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
	be := newBackend(t)
	gateway{upstream: be.addr(), shared: true, statusgate: []string{"key " + keyA, "max_per_client off", "cache status 1h"}}.start(t)
	const status = "/api/v1/status"
	wantFiltered(t, send(t, "GET", status), status)
	wantBackendBytes(t, send(t, "GET", status, withKey(keyA)), status)
	be.wantSeen(t, "the plain GETs", status, status)
	for i := range 20 {
		junk := fmt.Sprintf("%s?c=%d&key=%s", status, rand.Uint64(), keyB)
		if i%2 == 0 {
			wantFiltered(t, send(t, "GET", junk), status)
		} else {
			wantBackendBytes(t, send(t, "GET", junk, withKey(keyA)), status)
		}
	}
	be.wantSeen(t, "20 GETs with a query status does not read: the plain entry")
	plain := send(t, "GET", status)
	for range 4 {
		s := openLive(t, nil, fmt.Sprintf("%s?c=%d", status, rand.Uint64()))
		s.wantStream(t, "a stream with a query status does not read")
		if ev := s.nextEvent(t); ev.data != string(plain.Body) {
			t.Errorf("the stream's first event\n%s\nthe plain GET's answer\n%s", ev.data, plain.Body)
		}
		s.close()
	}
	be.wantSeen(t, "streams with a query status does not read: the plain topic and entry")

	const history = status + "?history=true"
	wantFiltered(t, send(t, "GET", status+"?c=1&history%3Dtrue&history=false"), history)
	be.wantSeen(t, "history, spelled as the backend reads it", history)
	for _, q := range []string{"?history=true", "?c=2&history=true", "?x=%26history=true", "?%68istory=true&d"} {
		wantFiltered(t, send(t, "GET", status+q), history)
	}
	be.wantSeen(t, "history in four more spellings: its one entry")
	wantFiltered(t, send(t, "GET", status+"?history=TRUE&History=true&history"), status)
	be.wantSeen(t, "spellings the backend does not read as history: the plain entry")
}

// TestQueryWhatReachesTheBackend: each endpoint's query reaches the backend
// as it reads it, and nothing else: a flag once, of several pairs of a
// parameter the last as written, never the key; a custom station's whole
// query but the key.
func TestQueryWhatReachesTheBackend(t *testing.T) {
	be := newBackend(t)
	startDefault(t, be, "enable custom/votes")
	for _, c := range []struct{ target, want string }{
		{"/api/v1/player/" + alex + "?n=1&detailed=true&detailed=false", "/api/v1/player/" + alex + "?detailed=true"},
		{"/api/v1/player/" + alex + "?detailed%3Dtrue", "/api/v1/player/" + alex + "?detailed=true"},
		{"/api/v1/player/" + alex + "?Detailed=true&history=true", "/api/v1/player/" + alex},
		{"/api/v1/server?n=1&key=" + keyB + "&history=true", "/api/v1/server"},
		{"/api/v1/punishments?view=html&c=1", "/api/v1/punishments?view=html"},
		{"/api/v1/placeholders?c=1&p=%25a%25&uuid=" + alex + "&p=%25b%25&P=x&UUID=y&key=" + keyB, "/api/v1/placeholders?uuid=" + alex + "&p=%25b%25"},
		{"/api/v1/placeholders?%70=x&uuid=" + alex + "&list=true", "/api/v1/placeholders?uuid=" + alex + "&%70=x&list=true"},
		{"/api/v1/custom/votes?page=2&k%65y=" + keyB + "&c=%41", "/api/v1/custom/votes?page=2&c=%41"},
	} {
		if r := send(t, "GET", c.target, withKey(keyA)); r.Status != 200 {
			t.Errorf("%s: %d %s", c.target, r.Status, clip(r.Body))
		}
		be.wantSeen(t, c.target, c.want)
	}
	// The answer is the one the backend gives to what it got.
	r := send(t, "GET", "/api/v1/placeholders?p=first&uuid="+alex+"&p=second", withKey(keyA))
	if !strings.Contains(string(r.Body), `"second":"Alex_MC"`) || strings.Contains(string(r.Body), "first") {
		t.Errorf("placeholders with two p: %s, want the last one's answer", r.Body)
	}
}
