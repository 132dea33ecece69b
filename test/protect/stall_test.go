package protect

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestStalledReadersLockNobodyOut has eight clients from two addresses ask
// for a 4.5 MB answer, each its own, and stop reading: the backend answered
// them all, and a keyed caller and an anonymous caller from another address
// are served, with coalescing and the per-client limit off (so every stalled
// request made its own trip) and with the defaults. With write_timeout off
// the stalled readers hold on for as long as the test runs: a caller locked
// out behind them would never be answered, whatever the machine's speed.
func TestStalledReadersLockNobodyOut(t *testing.T) {
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%v", shared), func(t *testing.T) {
			be := NewBackend(t)
			huge := hugePlayerBody()
			be.Respond = func(u *url.URL) (int, []byte) { return http.StatusOK, huge }
			g := Gateway{
				Upstream:   be.Addr(),
				Statusgate: []string{"key " + KeyA, "max_response 8MiB", "max_held 1GiB", "write_timeout off"},
				Shared:     shared,
				Global:     []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\ttrusted_proxies static 127.0.0.0/8\n\t\ttrusted_proxies_strict\n\t}"},
			}
			g.Start(t)
			for i := range 8 {
				StalledClient(t, PlayerN(i), fmt.Sprintf("X-Forwarded-For: 203.0.113.%d", i%2))
			}
			WaitSeen(t, be, 8)
			be.Respond = nil

			WantBackendBytes(t, Send(t, "GET", "/api/v1/server", WithKey(KeyA)), "/api/v1/server")
			WantFiltered(t, Send(t, "GET", "/api/v1/status", "X-Forwarded-For: 198.51.100.7"), "/api/v1/status")
		})
	}
}

// TestStalledClientCutOff checks the progress deadline: a client that takes
// nothing of a large answer for write_timeout loses its connection, and gets
// less than the whole answer even if it starts reading later; one that reads
// gets it all.
func TestStalledClientCutOff(t *testing.T) {
	be := NewBackend(t)
	huge := hugePlayerBody()
	be.Respond = func(u *url.URL) (int, []byte) { return http.StatusOK, huge }
	Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "write_timeout 1s", "max_response 8MiB"}}.Start(t)
	player := "/api/v1/player/" + Alex
	sent := time.Now()
	conn := StalledConn(t, player, WithKey(KeyA))
	WaitSeen(t, be, 1)
	// The request is counted when the gateway has ended it: only the cut
	// can end it while the client takes nothing.
	fixture.WaitFor(t, "the gateway to end the stalled request", func() bool {
		got, _ := ScrapeAdmin(t)
		n := 0.0
		for k, v := range got {
			if strings.HasPrefix(k, `caddy_http_statusgate_requests_total{endpoint="player",`) {
				n += v
			}
		}
		return n == 1
	})
	// Under the default write_timeout (10 s, docs/backend-protection.md)
	// the cut could come no sooner than 10 s after the request was sent;
	// sooner, the config's 1 s is the one in force.
	if took := time.Since(sent); took >= 10*time.Second {
		t.Errorf("the stalled client was cut %v after its request, not before the default write_timeout (10s): the config's 1s was not in force", took)
	}
	_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := io.Copy(io.Discard, conn)
	if n >= int64(len(huge)) {
		t.Errorf("a client that read nothing until the gateway ended its request got all %d bytes; want the connection cut after write_timeout", n)
	}
	WantUntouched(t, Send(t, "GET", player, WithKey(KeyA)), "a reading client", huge)
}

// hugePlayerBody is a valid player record of about 4.5 MB.
func hugePlayerBody() []byte {
	var b strings.Builder
	b.WriteString(`{"ok":true,"data":{"uuid":"` + Alex + `","name":"Alex_MC","sessions":[`)
	for i := range 60000 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"server":"s%d","ticks":%d,"tps":20.0,"pad":"0123456789abcdef0123456789abcdef"}`, i, i*7)
	}
	b.WriteString(`]},"meta":{"version":"v1","server":"global","updatedAt":` + UpdatedAt + `,"authenticated":true}}`)
	return []byte(b.String())
}

// TestFollowersBehindStalledLeader sends four identical requests after a first
// one whose client stops reading: they share its trip and are answered as
// soon as the backend is, not when (or if) the stalled client reads.
func TestFollowersBehindStalledLeader(t *testing.T) {
	be := NewBackend(t)
	be.Respond = func(u *url.URL) (int, []byte) { return http.StatusOK, BigPlayerBody() }
	// write_timeout off: the stalled client never lets go, so a follower
	// that waited for it would never be answered. timeout off: how long
	// the trip takes on a busy machine is not the question.
	Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "max_per_client off", "write_timeout off", "timeout off"}, Shared: true}.Start(t)
	be.HoldAnswers() // the trip lasts until the followers have joined it
	defer be.Release()
	player := "/api/v1/player/" + Alex
	StalledClient(t, player)
	fixture.WaitFor(t, "the stalled client's trip at the backend", func() bool { return be.AtBackend() == 1 })
	out := make([]Response, 4)
	var wg sync.WaitGroup
	for i := range out {
		wg.Go(func() { out[i] = Send(t, "GET", player) })
	}
	fixture.WaitFor(t, "the followers to join the trip", func() bool { return CoalesceWaiting(t)+be.AtBackend() >= 1+len(out) })
	be.Release()
	wg.Wait()
	for i, r := range out {
		WantFilteredFrom(t, r, fmt.Sprintf("follower %d", i), BigPlayerBody(), PlayerFields...)
	}
	if seen := be.Take(); len(seen) != 1 {
		t.Errorf("five identical requests made %d trips, want 1", len(seen))
	}
}

// TestFollowersReleasedWhenTooLarge: when the shared trip's answer turns out
// larger than max_response, it streams to the first caller (who stalls, for
// as long as the test runs: write_timeout off) and the waiting callers make
// their own trips, rather than wait for a client that never reads.
func TestFollowersReleasedWhenTooLarge(t *testing.T) {
	be := NewBackend(t)
	be.Respond = func(u *url.URL) (int, []byte) { return http.StatusOK, BigPlayerBody() }
	Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "max_per_client off", "max_response 64KiB", "write_timeout off", "timeout off"}, Shared: true}.Start(t)
	be.Misbehave(SendSlow)
	defer be.Misbehave(Behave)
	player := "/api/v1/player/" + Alex
	StalledClient(t, player)
	WaitSeen(t, be, 1)
	var wg sync.WaitGroup
	for i := range 3 {
		wg.Go(func() {
			r := Send(t, "GET", player)
			WantFilteredFrom(t, r, fmt.Sprintf("released follower %d", i), BigPlayerBody(), PlayerFields...)
		})
	}
	wg.Wait()
}

// TestStalledH2Streams opens h2c streams for a large public answer with a
// flow-control window of zero, so that the gateway cannot write a byte to
// them. With write_timeout off they hold what they hold for as long as the
// test runs, and a keyed caller is still served: had it waited for them it
// would never be answered (an order that a deadline of 3 s could not show
// on a busy machine, where 3 s may pass before the keyed caller is in).
// With write_timeout, the streams are reset.
func TestStalledH2Streams(t *testing.T) {
	be := NewBackend(t)
	for _, writeTimeout := range []string{"off", "1s"} {
		Gateway{
			Upstream: be.Addr(),
			// A queue that waits longer than the test would (WaitSeen
			// waits as long as requests keep arriving), and a share of
			// the held bytes (a sixteenth of max_held) that holds every
			// stream's answer: every stream reaches the backend, however
			// slowly a busy machine spools them (with the default, 4 MiB,
			// a request that came after eight answers were held was
			// refused before it reached the backend).
			Statusgate: []string{"key " + KeyA, "write_timeout " + writeTimeout, "queue 64 10m", "timeout off", "max_held 1GiB"},
			Global:     []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\tprotocols h1 h2c\n\t}"},
		}.Start(t)
		be.Misbehave(SendBig)
		const streams = 64
		resets, conn := stalledH2(t, streams)
		WaitSeen(t, be, streams)
		be.Misbehave(Behave)
		if writeTimeout == "off" {
			WantBackendBytes(t, Send(t, "GET", "/api/v1/server", WithKey(KeyA)), "/api/v1/server")
			if n := resets.Load(); n > 0 {
				t.Errorf("write_timeout off: %d stalled streams were reset", n)
			}
			conn.Close() // its streams end, and with them the old config
			continue
		}
		fixture.WaitFor(t, "the stalled streams to be reset after write_timeout", func() bool { return resets.Load() == streams })
	}
}

// stalledH2 opens one h2c connection with an initial window of zero and asks
// for a player on n streams (each its own player, playerN, so that none is
// shared: the query is not the trip's); it counts the streams the server
// resets. The connection closes when the test ends, or when the caller
// closes it.
func stalledH2(t *testing.T, n int) (*atomic.Int32, net.Conn) {
	t.Helper()
	conn, err := net.DialTimeout("tcp", GatewayAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	fr := http2.NewFramer(conn, bufio.NewReader(conn))
	if err := fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0}); err != nil {
		t.Fatal(err)
	}
	resets := new(atomic.Int32)
	go func() {
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			switch f := f.(type) {
			case *http2.SettingsFrame:
				if !f.IsAck() {
					mu.Lock()
					_ = fr.WriteSettingsAck()
					mu.Unlock()
				}
			case *http2.RSTStreamFrame:
				resets.Add(1)
			}
		}
	}()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for i := range n {
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", GatewayAddr}, {":path", PlayerN(i)}} {
			_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		mu.Lock()
		err := fr.WriteHeaders(http2.HeadersFrameParam{StreamID: uint32(2*i + 1), BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
		mu.Unlock()
		if err != nil {
			t.Fatal(err)
		}
	}
	return resets, conn
}

// TestReloadKeepsCounting reloads the same config three times while twelve
// slow requests run against a backend limited to two at once: the backend
// never sees more than two, because the new handlers share the old ones'
// guard.
func TestReloadKeepsCounting(t *testing.T) {
	var inFlight, peak, total atomic.Int32
	slow := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		total.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(300 * time.Millisecond)
		WriteBackend(w, http.StatusOK, Envelope(`{"motd":"x"}`))
	}))
	defer slow.Close()
	g := Gateway{Upstream: slow.Listener.Addr().String(), Statusgate: []string{"key " + KeyA, "max_in_flight 2", "queue 64 10s", "timeout 15s"}}
	g.Start(t)
	var wg sync.WaitGroup
	codes := make([]int, 12)
	var reloads sync.WaitGroup
	for i := range codes {
		// Four a wave, one wave per config. A reload returns only when the
		// old config has drained, so it runs beside the next wave, which
		// the new handler takes while the old one's requests are still at
		// the backend or in its queue.
		if i > 0 && i%4 == 0 {
			reloads.Wait()
			reloads.Go(func() { g.Start(t) })
			time.Sleep(100 * time.Millisecond)
		}
		wg.Go(func() { codes[i] = Send(t, "GET", fmt.Sprintf("/api/v1/server?n=%d", i), WithKey(KeyA)).Status })
	}
	reloads.Wait()
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d: %d", i, c)
		}
	}
	if p := peak.Load(); p > 2 {
		t.Errorf("the backend had %d requests at once across reloads, max_in_flight 2", p)
	}
	if total.Load() != 12 {
		t.Errorf("the backend saw %d requests, want 12", total.Load())
	}
}
