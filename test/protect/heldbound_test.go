package protect

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// These tests hold the gateway to its one bound on what it keeps for
// strangers (docs/backend-protection.md, "Keyed callers first"): answers
// charged and lent, stream heads and topic events add up within max_held,
// and a key's streams and topics count in its own share.

// trustedLocal makes the gateway trust X-Forwarded-For from the test, so
// that each request can come from an address of its own, as a flood's do.
var trustedLocal = []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\ttrusted_proxies static 127.0.0.0/8\n\t\ttrusted_proxies_strict\n\t}"}

// sizedPlayers is a backend whose players answer with bodies of exactly
// size bytes (the plugin's envelope, padded with a member no field list
// removes); everything else as the plugin.
func sizedPlayers(t *testing.T, size int) *Backend {
	be := NewBackend(t)
	be.Respond = func(u *url.URL) (int, []byte) {
		uuid, ok := strings.CutPrefix(u.Path, "/api/v1/player/")
		if !ok {
			return BackendResponse(u)
		}
		body := func(pad int) []byte {
			return Envelope(`{"uuid":"` + uuid + `","name":"Alex_MC","pad":"` + strings.Repeat("x", pad) + `"}`)
		}
		return 200, body(size - len(body(0)))
	}
	return be
}

// from is the X-Forwarded-For of the client numbered i of a flood.
func from(i int) string {
	return fmt.Sprintf("X-Forwarded-For: 10.%d.%d.%d", 50+i/65536, i/256%256, i%256)
}

// bigAnswer is the size of the large answers below: 3 MB, as a modded
// server's detailed player, more than a connection's buffers take from a
// client that reads nothing (a smaller one is written whole into them, and
// held by nobody).
const bigAnswer = 3_000_000

// TestStalledCacheHitsWithinMaxHeld: 20 addresses each ask for a cached
// answer of 3 MB, each another, and read nothing. A cache hit is lent the
// cache's bytes, which the cache may let go while the reader still holds
// them: so what they hold counts in max_held and in anonymous callers'
// half, and past it their cache hits are refused (503). Before, each was
// bounded only by its address's share, and 20 of them held 60 MB against a
// max_held of 16 MiB with held_anonymous_bytes at 0 (the attack of issue
// 50: 50 addresses, 195 MB against 64 MiB). A key still gets the same large
// answer.
func TestStalledCacheHitsWithinMaxHeld(t *testing.T) {
	const clients, maxHeld = 20, 16 << 20
	be := sizedPlayers(t, bigAnswer)
	Gateway{Upstream: be.Addr(), Shared: true, Global: trustedLocal,
		Statusgate: []string{"key staff " + KeyA, "max_held 16MiB", "cache_size 64MiB", "cache player 1h", "write_timeout off"}}.Start(t)
	for i := range clients {
		if r := Send(t, "GET", PlayerN(i), from(1000+i)); r.Status != http.StatusOK || r.Err != nil {
			t.Fatalf("the answer that fills the cache, %s: %d %v", PlayerN(i), r.Status, r.Err)
		}
	}
	be.Take()
	codes := map[int]int{}
	for i := range clients {
		codes[statusLine(t, StalledConn(t, PlayerN(i), from(i)))]++
	}
	be.WantSeen(t, "cache hits alone")
	got, _ := ScrapeAdmin(t)
	held, anon := got[`caddy_http_statusgate_held_bytes{guard=""}`], got[`caddy_http_statusgate_held_anonymous_bytes{guard=""}`]
	t.Logf("%d stalled cache hits of %d bytes: %v; held %v, of it anonymous %v", clients, bigAnswer, codes, held, anon)
	if held > maxHeld || anon > maxHeld/2 {
		t.Errorf("held %v, anonymous %v: want at most max_held, %d, and anonymous callers' half", held, anon, maxHeld)
	}
	if codes[http.StatusOK] == 0 || codes[http.StatusOK]+codes[http.StatusServiceUnavailable] != clients {
		t.Errorf("stalled cache hits: %v, want some lent and the rest refused with 503", codes)
	}
	if r := Send(t, "GET", PlayerN(0), WithKey(KeyA)); r.Status != http.StatusOK || len(r.Body) < bigAnswer {
		t.Errorf("the key beside the stalled readers: %d, %d bytes", r.Status, len(r.Body))
	}
}

// TestOneKeyLeavesTheStaffKeyRoom: with anonymous callers holding most of
// their half of max_held (16 MiB), a second key opens four streams of large
// topics (3 MB each) and then stalls large answers of its own. Its topics'
// events count in its share (a quarter of max_held by default), so past it
// its streams and answers are refused, and the staff key still opens a
// stream of a new large topic and gets a large answer. Before, a keyed
// topic's event was charged to no key's share and a key's share was half
// of max_held: the second key spent the rest, and the staff key's stream got
// 503.
func TestOneKeyLeavesTheStaffKeyRoom(t *testing.T) {
	const size, maxHeld = bigAnswer, 16 << 20
	be := sizedPlayers(t, size)
	Gateway{Upstream: be.Addr(), Shared: true, Global: trustedLocal,
		Statusgate: []string{"key staff " + KeyA, "key bot " + KeyB, "max_held 16MiB",
			"cache player 1h", "write_timeout off", "stream_heartbeat 1h"}}.Start(t)
	// Anonymous callers: two answers of 3 MB read by nobody, each a trip
	// of its own (the cache's misses), 6 MB of their 8 MiB.
	for i := range 2 {
		if code := statusLine(t, StalledConn(t, PlayerN(i), from(i))); code != http.StatusOK {
			t.Fatalf("anonymous stalled reader %d: %d", i, code)
		}
	}
	// The second key: four streams of large topics, each read as it comes.
	bot := map[int]int{}
	for i := range 4 {
		s := OpenLive(t, nil, PlayerN(100+i), WithKey(KeyB))
		bot[s.Resp.StatusCode]++
		if s.Resp.StatusCode == http.StatusOK {
			if it := s.NextEvent(t); it.End || len(it.Data) < size {
				t.Fatalf("the bot's stream %d: %+v", i, it.End)
			}
		} else {
			s.Close()
		}
	}
	// ... and large answers it does not read, until it is refused.
	for i := range 8 {
		code := statusLine(t, StalledConn(t, PlayerN(200+i), WithKey(KeyB)))
		bot[code]++
		if code != http.StatusOK {
			break
		}
	}
	got, _ := ScrapeAdmin(t)
	t.Logf("the bot's streams and stalled answers: %v; held %v", bot, got[`caddy_http_statusgate_held_bytes{guard=""}`])
	if bot[http.StatusOK] != 1 {
		t.Errorf("the bot was given %v: want one stream, its share of 4 MiB", bot)
	}

	// The staff key: a large answer, and a stream of a new large topic
	// (which then keeps most of its own share of 4 MiB).
	if r := Send(t, "GET", PlayerN(301), WithKey(KeyA)); r.Status != http.StatusOK || len(r.Body) < size {
		t.Errorf("the staff key's large answer: %d, %d bytes", r.Status, len(r.Body))
	}
	s := OpenLive(t, nil, PlayerN(300), WithKey(KeyA))
	s.WantStream(t, "the staff key's stream of a new large topic")
	if it := s.NextEvent(t); it.End || len(it.Data) < size {
		t.Errorf("the staff key's stream: end %v, %d bytes", it.End, len(it.Data))
	}
	got, _ = ScrapeAdmin(t)
	if held := got[`caddy_http_statusgate_held_bytes{guard=""}`]; held > maxHeld {
		t.Errorf("held %v, more than max_held %d", held, maxHeld)
	}
}

// TestSmallAnswerNeverCharged: an anonymous answer of 16,200 bytes, under
// the 16 KiB that is never charged, is held whole, cached and served from
// the cache while anonymous callers' half of max_held has less room than
// the buffer it is read into (32 KiB: the backend's Content-Length with the
// field layer's margin rounds it up). Before, the buffer was charged, the
// answer streamed through instead (it did not fit), and nothing was cached.
func TestSmallAnswerNeverCharged(t *testing.T) {
	be := sizedPlayers(t, 16_200)
	Gateway{Upstream: be.Addr(), Shared: true,
		Statusgate: []string{"max_held 64KiB", "max_response 32KiB", "cache player 1h", "stream_heartbeat 1h"}}.Start(t)
	// An anonymous stream's head: a few hundred bytes of anonymous
	// callers' 32 KiB.
	s := OpenLive(t, nil, "/api/v1/status")
	s.WantStream(t, "an anonymous stream")
	s.NextEvent(t)
	be.Take()
	player := PlayerN(1)
	for i := range 2 {
		if r := Send(t, "GET", player); r.Status != http.StatusOK || len(r.Body) < 16_000 {
			t.Fatalf("request %d: %d, %d bytes", i, r.Status, len(r.Body))
		}
	}
	be.WantSeen(t, "the small answer once, then from the cache", player)
}
