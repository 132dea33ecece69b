package guard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/live"
)

// TestShareKeySite: a shared answer's key tells sites apart by the Host the
// backend is sent (SentHost, which the handler applies before it decides)
// and the port the request came in on, not by the port a client writes in
// its Host, its case or a trailing dot; and a Host sent otherwise is
// another key.
func TestShareKeySite(t *testing.T) {
	g := &Guard{policy: "p"}
	key := func(host string, port int) string {
		r := httptest.NewRequest("GET", "/api/v1/worlds", nil)
		r.Host = SentHost(host)
		if port > 0 {
			r = r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port}))
		}
		return g.shareKey(r, true, nil)
	}
	if key("localhost:9001", 9001) == key("localhost:9002", 9002) {
		t.Error("two ports of one host name share answers")
	}
	if key("localhost:9002", 9001) != key("LocalHost.:9001", 9001) {
		t.Error("the Host's port or spelling splits one site")
	}
	if key("a.example", 9001) == key("b.example", 9001) {
		t.Error("two hosts on one port share answers")
	}
	if key("a.example..", 9001) == key("a.example", 9001) {
		t.Error("two Hosts sent share answers")
	}
}

// TestSentHost: the Host the backend is sent, for each spelling of a
// client's.
func TestSentHost(t *testing.T) {
	for in, want := range map[string]string{
		"survival.test":         "survival.test",
		"survival.test.":        "survival.test",
		"SURVIVAL.TEST.:8080":   "survival.test",
		"Survival.Test:":        "survival.test",
		"survival.test..":       "survival.test.",
		"127.0.0.1:8080":        "127.0.0.1",
		"[::1]:8080":            "[::1]",
		"[FE80::1]":             "[fe80::1]",
		"":                      "",
		"localhost.localdomain": "localhost.localdomain",
	} {
		if got := SentHost(in); got != want {
			t.Errorf("SentHost(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestTopicBudgetSmallEvents: a topic's event of a small answer is kept
// whatever the held bytes hold (a budget slow readers filled must not end
// the /status topic and every stream of it), judged on the answer, not the
// framing; a large one only while it fits.
func TestTopicBudgetSmallEvents(t *testing.T) {
	held := hold.New(100<<10, 100<<10, 50<<10)
	if err := held.Take(hold.Share{}, 50<<10); err != nil {
		t.Fatal(err)
	}
	b := topicBudget{held}
	event := func(answer int) *live.Event {
		return &live.Event{Wire: make([]byte, answer+64), Size: answer}
	}
	release, ok := b.Keep("status", nil, false, event(hold.Small))
	if !ok {
		t.Fatal("a small event refused by a full anonymous pool")
	}
	if _, ok := b.Keep("player", nil, false, event(hold.Small+1)); ok {
		t.Error("a large event kept past the anonymous pool")
	}
	release()
	if held.Held() != 50<<10 {
		t.Errorf("held %d after the small event was dropped, want the 50 KiB taken before", held.Held())
	}
}

// TestTopicBudgetKeyedOwner: a keyed topic's event is kept in the share of
// the key that opened it, so that a key's topics cannot take more than its
// share; an anonymous topic's in the anonymous pool, under no address.
func TestTopicBudgetKeyedOwner(t *testing.T) {
	held := hold.New(1<<20, 256<<10, 512<<10)
	b := topicBudget{held}
	key := Caller{Holder: "key bot", Keyed: true, Held: hold.Share{Bytes: 100 << 10, Keyed: true}}
	event := func() *live.Event { return &live.Event{Wire: make([]byte, 60<<10), Size: 60 << 10} }
	release, ok := b.Keep("a", key, true, event())
	if !ok {
		t.Fatal("a keyed topic's event within its key's share refused")
	}
	if _, ok := b.Keep("b", key, true, event()); ok {
		t.Error("a second keyed topic's event past its key's share kept")
	}
	other := Caller{Holder: "key staff", Keyed: true, Held: hold.Share{Bytes: 100 << 10, Keyed: true}}
	r2, ok := b.Keep("b", other, true, event())
	if !ok {
		t.Error("another key's topic refused")
	}
	r3, ok := b.Keep("c", nil, false, event())
	if !ok || held.Anonymous() != 60<<10 {
		t.Errorf("an anonymous topic: kept %v, anonymous %d", ok, held.Anonymous())
	}
	release()
	r2()
	r3()
	if held.Held() != 0 {
		t.Errorf("held %d after every topic let its event go", held.Held())
	}
}
