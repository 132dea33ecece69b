package protect

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// These tests put the held bytes to work with answers of a modded server:
// the sim's detailed player of about 3 MB (modded_items 20000), beside
// keyed callers that read what they ask for and anonymous ones.

// moddedSim is a site of the in-process Caddy that serves the demo backend
// with a detailed player of about 3 MB, on a free port; it returns the
// site block and the upstream address.
func moddedSim(t *testing.T) (site, upstream string) {
	t.Helper()
	return SimSite(t, "seed 7", "latency * 0", "modded_items 20000")
}

// detailedAlex is the large public answer: Alex_MC, the most active player,
// with detailed statistics.
const detailedAlex = "/api/v1/player/" + Alex + "?detailed=true"

// readAtPace is send for a client on a real network: it reads the answer
// whole, a piece of 32 KiB at a time with a pause of a millisecond after
// each (at most 32 MB/s: a 3 MB answer takes a tenth of a second or more).
func readAtPace(t testing.TB, target string, headers ...string) Response {
	t.Helper()
	fail := func(what string, err error) Response {
		return Response{Err: fmt.Errorf("GET %q: %s: %w", target, what, err)}
	}
	conn, err := net.DialTimeout("tcp", GatewayAddr, 5*time.Second)
	if err != nil {
		return fail("dial", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(Patience))
	req := "GET " + target + " HTTP/1.1\r\nHost: " + GatewayAddr + "\r\n" + strings.Join(append(headers, "Connection: close"), "\r\n") + "\r\n\r\n"
	if _, err := io.WriteString(conn, req); err != nil {
		return fail("writing the request", err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: "GET"})
	if err != nil {
		return fail("reading the response", err)
	}
	r := Response{Status: res.StatusCode, Header: res.Header}
	r.Body, r.Err = harness.ReadAtPace(res.Body, time.Millisecond)
	return r
}

// TestKeyedWorkersBesideBigAnswers runs four keyed workers that fetch
// /server, /bans, /performance and the detailed player back to back,
// reading every answer whole at a network's pace (readAtPace), beside
// eight anonymous pollers of the same detailed player from one address,
// with the defaults: every keyed request is answered 200 with the whole
// answer, and the anonymous pollers, which share one address's place and
// share of the held bytes, get their answers or 429/503, nothing else, and
// are still held to that share.
func TestKeyedWorkersBesideBigAnswers(t *testing.T) {
	simSite, upstream := moddedSim(t)
	Gateway{Upstream: upstream, Shared: true, Sites: []string{simSite}, Statusgate: []string{"key staff " + KeyA}}.Start(t)
	if r := Send(t, "GET", detailedAlex, WithKey(KeyA)); r.Status != http.StatusOK || len(r.Body) < 2<<20 {
		t.Fatalf("the detailed player: %d, %d bytes (%v); want 200 and about 3 MB", r.Status, len(r.Body), r.Err)
	}

	const workers, rounds, pollers = 4, 12, 8
	targets := []string{"/api/v1/server", "/api/v1/bans", "/api/v1/performance", detailedAlex}
	var keyedDone atomic.Bool
	var mu sync.Mutex
	keyed := map[string]map[int]int{} // target: status: count
	anon := map[int]int{}
	var wg, polling sync.WaitGroup
	for range pollers {
		polling.Go(func() {
			for !keyedDone.Load() {
				r := readAtPace(t, detailedAlex)
				if r.Status == http.StatusOK && (r.Err != nil || !bytes.Contains(r.Body, []byte(`"authenticated":false`))) {
					t.Errorf("an anonymous poller's 200: %v, %s", r.Err, Clip(r.Body))
				}
				mu.Lock()
				anon[r.Status]++
				mu.Unlock()
			}
		})
	}
	for w := range workers {
		wg.Go(func() {
			for range rounds {
				for i := range targets {
					// Each worker starts at another target, so that they do
					// not move in step.
					target := targets[(w+i)%len(targets)]
					r := readAtPace(t, target, WithKey(KeyA))
					if r.Status == http.StatusOK && (r.Err != nil || !bytes.Contains(r.Body, []byte(`"authenticated":true`))) {
						t.Errorf("%s, keyed: a 200 that is not the whole answer: %v, %s", target, r.Err, Clip(r.Body))
					}
					mu.Lock()
					if keyed[target] == nil {
						keyed[target] = map[int]int{}
					}
					keyed[target][r.Status]++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	keyedDone.Store(true)
	polling.Wait()
	t.Logf("keyed: %v; anonymous: %v", keyed, anon)
	for target, codes := range keyed {
		if codes[http.StatusOK] != workers*rounds {
			t.Errorf("%s, keyed: %v; want all %d answered 200", target, codes, workers*rounds)
		}
	}
	for code := range anon {
		if code != http.StatusOK && code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable {
			t.Errorf("anonymous pollers: %v; want 200, 429 or 503", anon)
		}
	}
	if anon[http.StatusOK] == 0 {
		t.Errorf("anonymous pollers: %v; none was answered", anon)
	}

	// The pollers' address is still held to its share by its bytes: one
	// answer held unread (its status line came: it is held) is half of it,
	// and the address's next request is refused at once.
	if code := statusLine(t, StalledConn(t, detailedAlex)); code != http.StatusOK {
		t.Fatalf("an anonymous reader: %d", code)
	}
	if r := Send(t, "GET", "/api/v1/status"); r.Status != http.StatusTooManyRequests {
		t.Errorf("an address holding an answer unread: %d, want 429", r.Status)
	}
}

// heldBytes is the gateway's held_bytes gauge, summed over its guards.
func heldBytes(t *testing.T) int64 {
	t.Helper()
	got, _ := ScrapeAdmin(t)
	var n float64
	for k, v := range got {
		if strings.HasPrefix(k, "caddy_http_statusgate_held_bytes") {
			n += v
		}
	}
	return int64(n)
}

// waitHeld waits until the gateway holds what ok accepts, and returns it.
func waitHeld(t *testing.T, what string, ok func(int64) bool) int64 {
	t.Helper()
	var n int64
	fixture.WaitEvery(t, what, 20*time.Millisecond, func() bool {
		n = heldBytes(t)
		return ok(n)
	})
	return n
}

// statusLine reads the status code from a stalled connection: the first
// line only, which leaves the rest of the answer unread.
func statusLine(t *testing.T, conn net.Conn) int {
	t.Helper()
	_ = conn.SetReadDeadline(time.Now().Add(Patience))
	line, err := bufio.NewReaderSize(conn, 64).ReadString('\n')
	if err != nil {
		t.Fatalf("reading a status line: %v", err)
	}
	var proto string
	var code int
	if _, err := fmt.Sscan(line, &proto, &code); err != nil {
		t.Fatalf("status line %q: %v", line, err)
	}
	return code
}

// TestKeyStalledReadersHoldTheirShare has a key's clients ask for the large
// answer, each its own, and read nothing: as many of them are answered as
// the key's share holds (its default, 16 MiB, and max_held 8MiB in its
// block, in the Caddyfile and in the JSON), the rest get 429 at once, and the gateway holds exactly the
// answers it gave them. Meanwhile another key, and an anonymous caller, are
// served the same answer whole. With write_timeout off the stalled readers
// keep what they hold for as long as the test runs, whatever the machine's
// speed; closing them gives it back.
func TestKeyStalledReadersHoldTheirShare(t *testing.T) {
	for _, tc := range []struct {
		name, block string
		json        [2]string // the JSON to load: the adapted block's, with json[0] written json[1]
		share       int64
		readers     int
	}{
		{"default share", "key staff " + KeyA, [2]string{}, 16 << 20, 12},
		{"max_held 8MiB", "key staff " + KeyA + " {\n\t\t\tmax_held 8MiB\n\t\t}", [2]string{}, 8 << 20, 8},
		{"max_held in the JSON", "key staff " + KeyA + " {\n\t\t\tmax_held 5MiB\n\t\t}", [2]string{`"max_held":5242880`, `"max_held":8388608`}, 8 << 20, 8},
	} {
		t.Run(tc.name, func(t *testing.T) {
			simSite, upstream := moddedSim(t)
			// Coalescing off: each reader's answer is one of its own (the
			// query is the endpoint's, so the readers ask for the same
			// player, and shared bytes are held once per client).
			g := Gateway{Upstream: upstream, Shared: true, Sites: []string{simSite},
				Statusgate: []string{tc.block, "key other " + KeyB, "write_timeout off", "coalesce off"}}
			if tc.json[0] == "" {
				g.Start(t)
			} else {
				loadJSON(t, bytes.Replace(Adapt(t, g.Caddyfile()), []byte(tc.json[0]), []byte(tc.json[1]), 1))
			}
			size := int64(len(Send(t, "GET", detailedAlex, WithKey(KeyA)).Body))
			conns := make([]net.Conn, tc.readers)
			for i := range conns {
				conns[i] = StalledConn(t, detailedAlex, WithKey(KeyA))
			}
			codes := map[int]int{}
			for _, c := range conns {
				codes[statusLine(t, c)]++
			}
			fits := int(tc.share / size)
			if codes[http.StatusOK] != fits || codes[http.StatusTooManyRequests] != tc.readers-fits {
				t.Errorf("%d stalled readers of %d bytes with a share of %d: %v; want %d answered and the rest 429", tc.readers, size, tc.share, codes, fits)
			}
			// Exactly the answers given to the stalled readers, once the
			// first request's answer, read whole, is given back.
			waitHeld(t, fmt.Sprintf("the gateway to hold exactly the %d answers of %d bytes it gave the stalled readers", fits, size),
				func(n int64) bool { return n == int64(fits)*size })
			for _, r := range []Response{Send(t, "GET", detailedAlex, WithKey(KeyB)), Send(t, "GET", detailedAlex)} {
				if r.Status != http.StatusOK || r.Err != nil {
					t.Errorf("another caller beside the stalled key: %d %v", r.Status, r.Err)
				}
			}
			for _, c := range conns {
				c.Close()
			}
			waitHeld(t, "the closed readers' answers to be given back", func(n int64) bool { return n == 0 })
		})
	}
}

// TestKeyStalledReadersCut: four stalled readers of one key, each holding
// an answer of about 3 MB (as many as its default share, 16 MiB, holds
// with room to spare), are cut after write_timeout like anyone's, and what
// they held is given back while their connections are still open.
func TestKeyStalledReadersCut(t *testing.T) {
	simSite, upstream := moddedSim(t)
	Gateway{Upstream: upstream, Shared: true, Sites: []string{simSite},
		Statusgate: []string{"key staff " + KeyA, "write_timeout 2s", "coalesce off"}}.Start(t)
	size := len(Send(t, "GET", detailedAlex, WithKey(KeyA)).Body)
	conns := make([]net.Conn, 4)
	for i := range conns {
		conns[i] = StalledConn(t, detailedAlex, WithKey(KeyA))
	}
	// Each is answered: its status line came, so its answer is held. (Not
	// all four at once: on a busy machine the first may be cut before the
	// eighth is answered.)
	for i, c := range conns {
		if code := statusLine(t, c); code != http.StatusOK {
			t.Fatalf("stalled reader %d: %d, want 200", i, code)
		}
	}
	waitHeld(t, "the stalled readers to be cut", func(n int64) bool { return n == 0 })
	for i, c := range conns {
		// What statusLine's reader took past the status line is less than
		// the headers: a whole answer would still count size bytes or more.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if n, _ := io.Copy(io.Discard, c); n >= int64(size) {
			t.Errorf("stalled reader %d got all %d bytes after the gateway gave its answer back; want it cut", i, n)
		}
	}
}

// TestKeyJudgedByProgress gives a key a share of 4MiB, which holds one
// answer of about 3 MB: while one of its clients takes that answer, piece by
// piece, its other clients' requests are served; once the client that holds
// it stops taking it, they are refused (429), until write_timeout cuts it.
// The first part runs under write_timeout 1h, whose patience (half of it) no
// stretch between two pieces on a busy machine uses up; the second under
// 10s, so that the stalled reader is refused and cut within the test, with
// seconds between the two for the requests that see the refusal. (The
// time a key may take nothing before it is refused, half of write_timeout,
// is checked in the caddymodule package, where the test decides when the
// client takes a piece.)
func TestKeyJudgedByProgress(t *testing.T) {
	simSite, upstream := moddedSim(t)
	load := func(writeTimeout string) {
		t.Helper()
		Gateway{Upstream: upstream, Shared: true, Sites: []string{simSite},
			Statusgate: []string{"key staff " + KeyA + " {\n\t\t\tmax_held 4MiB\n\t\t}", "write_timeout " + writeTimeout}}.Start(t)
	}
	load("1h")
	size := len(Send(t, "GET", detailedAlex, WithKey(KeyA)).Body)
	// reader asks for the large answer with the key and reads its headers.
	reader := func() (net.Conn, *http.Response) {
		t.Helper()
		conn := StalledConn(t, detailedAlex, WithKey(KeyA))
		_ = conn.SetReadDeadline(time.Now().Add(Patience))
		res, err := http.ReadResponse(bufio.NewReaderSize(conn, 1024), &http.Request{Method: "GET"})
		if err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("the reader: %v, %v", res, err)
		}
		return conn, res
	}

	// A reader that takes 8 KiB, then lets a request of the same key go,
	// then takes the next 8 KiB: it holds its answer all along, and moves.
	conn, res := reader()
	read := int64(0)
	for i := range 20 {
		n, err := io.CopyN(io.Discard, res.Body, 8<<10)
		read += n
		if err != nil {
			t.Fatalf("the reader, after %d bytes: %v", read, err)
		}
		if r := Send(t, "GET", "/api/v1/server", WithKey(KeyA)); r.Status != http.StatusOK {
			t.Fatalf("request %d of the key while its reader takes its answer (%d of %d bytes taken): %d", i, read, size, r.Status)
		}
	}
	if heldBytes(t) < int64(size) {
		t.Fatalf("the reader's answer was no longer held after %d of %d bytes: the test proves nothing", read, size)
	}
	conn.Close()
	waitHeld(t, "the first reader's answer to be given back", func(n int64) bool { return n == 0 })

	// Under write_timeout 10s, a reader that takes 8 KiB of its answer and
	// then stops taking it: its key is refused from half the timeout on
	// (5 s), and the reader is cut at the whole: a window of seconds for
	// the requests below, however busy the machine.
	load("10s")
	_, res = reader()
	if _, err := io.CopyN(io.Discard, res.Body, 8<<10); err != nil {
		t.Fatalf("the second reader's first piece: %v", err)
	}
	fixture.WaitEvery(t, "the key's request to be refused while its reader takes nothing", 50*time.Millisecond, func() bool {
		r := Send(t, "GET", "/api/v1/server", WithKey(KeyA))
		if r.Status != http.StatusOK && r.Status != http.StatusTooManyRequests {
			t.Fatalf("while the reader stalls: %d", r.Status)
		}
		return r.Status == http.StatusTooManyRequests
	})
	waitHeld(t, "the stalled reader to be cut", func(n int64) bool { return n == 0 })
	if r := Send(t, "GET", "/api/v1/server", WithKey(KeyA)); r.Status != http.StatusOK {
		t.Errorf("the key's request once its stalled reader was cut: %d", r.Status)
	}

}

// loadJSON loads a JSON config as loadCaddyfile loads a Caddyfile.
func loadJSON(t *testing.T, config []byte) {
	t.Helper()
	if code, msg := PostJSON(t, config); code != http.StatusOK {
		t.Fatalf("JSON config refused: %d %s\n%s", code, msg, config)
	}
	AwaitOldListeners(t, config)
}

// TestKeyMaxHeldRefused: a key's max_held that does not fit the guard is a
// config error through Caddy's admin API, in the Caddyfile (with the line of
// max_held) and in the JSON (with the key's path), and the running config
// stays.
func TestKeyMaxHeldRefused(t *testing.T) {
	simSite, upstream := moddedSim(t)
	g := Gateway{Upstream: upstream, Shared: true, Sites: []string{simSite}, Statusgate: []string{"key staff " + KeyA}}
	g.Start(t)
	refused := Gateway{Upstream: upstream, Sites: []string{simSite},
		Statusgate: []string{"key staff " + KeyA + " {\n\t\t\tmax_held 128MiB\n\t\t}"}}.Caddyfile()
	line := 1 + strings.Count(refused[:strings.Index(refused, "max_held 128MiB")], "\n")
	msg := LoadRefused(t, refused)
	for _, want := range []string{"max_held: '128MiB' is more than the guard's max_held, 64MiB", "write at most 64MiB, or raise max_held", fmt.Sprintf("Caddyfile:%d", line)} {
		if !strings.Contains(msg, want) {
			t.Errorf("the Caddyfile's error %q does not say %q", msg, want)
		}
	}
	good := Adapt(t, Gateway{Upstream: upstream, Sites: []string{simSite},
		Statusgate: []string{"key staff " + KeyA + " {\n\t\t\tmax_held 8MiB\n\t\t}"}}.Caddyfile())
	for value, want := range map[string]string{
		"0":        "auth.keys[0] 'staff': max_held: 0 is not a size: write bytes, at least 1, or leave max_held out for the key's default share",
		"null":     "auth.keys[0] 'staff': max_held: null is not a size",
		"1048576":  "auth.keys[0] 'staff': max_held: 1048576 is less than max_response, 4MiB",
		"67108865": "auth.keys[0] 'staff': max_held: 67108865 is more than the guard's max_held, 64MiB",
	} {
		code, msg := PostJSON(t, bytes.Replace(good, []byte(`"max_held":8388608`), []byte(`"max_held":`+value), 1))
		if code == http.StatusOK || !strings.Contains(msg, want) {
			t.Errorf("max_held %s in the JSON: %d %q, want it refused with %q", value, code, msg, want)
		}
	}
	if r := Send(t, "GET", "/api/v1/server", WithKey(KeyA)); r.Status != http.StatusOK {
		t.Errorf("the running config after the refused ones: %d", r.Status)
	}
}

// TestAnonymousStreamsCannotLockTheKeyOut: anonymous streams from many
// addresses, each keeping a request head of about 20 KB, fill what
// anonymous callers may hold to the byte, the way an attacker can from
// status codes alone: streams until one is refused, then probes for the
// largest head still taken (each closed again), then one stream with
// exactly that head. What they hold stops at half of max_held, and the
// rest answers: a keyed caller's plain GET and its stream are 200, and so
// are an anonymous cache hit (which costs the backend nothing) and an
// anonymous answer too small ever to be held; only anonymous streams are
// refused, with 503.
func TestAnonymousStreamsCannotLockTheKeyOut(t *testing.T) {
	be := NewBackend(t)
	// An address's share is max_response, 64 KiB: each stream comes from
	// an address of its own, as a flood's would.
	Gateway{Upstream: be.Addr(), Shared: true,
		Statusgate: []string{"key staff " + KeyA, "max_held 1MiB", "max_response 64KiB", "stream_heartbeat 1h", "cache status 1h"},
		Global:     []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\ttrusted_proxies static 127.0.0.0/8\n\t\ttrusted_proxies_strict\n\t}"},
	}.Start(t)
	const status = "/api/v1/status"
	WantFiltered(t, Send(t, "GET", status, "X-Forwarded-For: 198.51.100.1"), status) // cached now
	held := func() float64 {
		got, _ := ScrapeAdmin(t)
		return got[`caddy_http_statusgate_held_bytes{guard=""}`]
	}
	addresses := 0
	// open opens an anonymous stream of status from a new address, its
	// head carrying a Last-Event-ID of n bytes: the stream, or nil when it
	// was refused with 503.
	open := func(n int) *LiveStream {
		t.Helper()
		addresses++ // every address as long as the next: heads differ by n alone
		s := OpenLive(t, nil, status, fmt.Sprintf("X-Forwarded-For: 10.1.%d.%d", 100+addresses/100, 100+addresses%100),
			"Last-Event-ID: "+strings.Repeat("x", n))
		switch s.Resp.StatusCode {
		case http.StatusOK:
			s.WantStream(t, "an anonymous stream")
			return s
		case http.StatusServiceUnavailable:
			s.Close()
			return nil
		}
		t.Fatalf("an anonymous stream with a head of %d bytes more: %d", n, s.Resp.StatusCode)
		return nil
	}
	var streams []*LiveStream
	for s := open(20_000); s != nil; s = open(20_000) {
		if streams = append(streams, s); len(streams) > 100 {
			t.Fatal("100 streams of 20 KB heads on a max_held of 1MiB, and none refused")
		}
	}
	// largest is the largest head a stream is still given, -1 if none: a
	// probe that is taken is closed, and its head given back, before the
	// next.
	largest := func() int {
		taken, refused := -1, 20_000
		for refused-taken > 1 {
			mid := (taken + refused) / 2
			before := held()
			s := open(mid)
			if s == nil {
				refused = mid
				continue
			}
			s.Close()
			fixture.WaitFor(t, "a probe's head given back", func() bool { return held() == before })
			taken = mid
		}
		return taken
	}
	n := largest()
	if n < 0 {
		// Less room left than a head without a Last-Event-ID takes: one
		// stream of the flood makes some.
		before := held()
		streams[0].Close()
		fixture.WaitFor(t, "a flood stream's head given back", func() bool { return held() < before })
		n = largest()
	}
	t.Logf("%d streams of 20 KB heads, then one of %d bytes more, from %d addresses", len(streams), n, addresses)
	if s := open(n); s == nil {
		t.Fatalf("the largest head taken, %d bytes, refused when it was sent again", n)
	}
	got, _ := ScrapeAdmin(t)
	for _, series := range []string{"held_bytes", "held_anonymous_bytes"} {
		if n := got[`caddy_http_statusgate_`+series+`{guard=""}`]; n != 512<<10 {
			t.Errorf("%s with the flood's streams: %v, want what anonymous callers may hold together, half of max_held (%d)", series, n, 512<<10)
		}
	}
	if s := open(0); s != nil {
		t.Fatal("an anonymous stream past what anonymous callers may hold was given")
	}
	be.Take()

	// The key's plain GET and its stream.
	WantBackendBytes(t, Send(t, "GET", "/api/v1/server", WithKey(KeyA)), "/api/v1/server")
	keyed := OpenLive(t, nil, status, WithKey(KeyA))
	keyed.WantStream(t, "the key's stream")
	if it := keyed.NextEvent(t); it.End || !strings.Contains(it.Data, `"authenticated":true`) {
		t.Errorf("the key's stream's first event: %+v", it)
	}
	be.WantSeen(t, "the key's GET and its stream's first answer", "/api/v1/server", status)

	// An anonymous cache hit, and an anonymous answer too small to hold.
	WantFiltered(t, Send(t, "GET", status, "X-Forwarded-For: 198.51.100.2"), status)
	be.WantSeen(t, "an anonymous cache hit")
	player := "/api/v1/player/" + Alex
	WantFiltered(t, Send(t, "GET", player, "X-Forwarded-For: 198.51.100.3"), player, PlayerFields...)
	be.WantSeen(t, "an anonymous answer too small to hold", player)
}
