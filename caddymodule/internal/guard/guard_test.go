package guard

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/statusgate/statusgate/caddymodule/internal/hold"
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
		return g.ShareKey(r, true, nil)
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
// the /status topic and every stream of it), and a large one only while it
// fits.
func TestTopicBudgetSmallEvents(t *testing.T) {
	held := hold.New(100<<10, 100<<10, 50<<10)
	if err := held.Take(hold.Share{}, 50<<10); err != nil {
		t.Fatal(err)
	}
	b := topicBudget{held}
	if !b.Keep(false, smallEvent) {
		t.Error("a small event refused by a full anonymous pool")
	}
	if b.Keep(false, smallEvent+1) {
		t.Error("a large event kept past the anonymous pool")
	}
	b.Drop(false, smallEvent)
	if held.Held() != 50<<10 {
		t.Errorf("held %d after the small event was dropped, want the 50 KiB taken before", held.Held())
	}
}
