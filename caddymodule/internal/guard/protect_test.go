package guard

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
	"github.com/statusgate/statusgate/caddymodule/jsonfilter"
	"github.com/statusgate/statusgate/internal/fixture"
)

// TestMicroCacheStaleThenNew: past its time to live a cache entry is still
// served, at once, while one request refreshes it in the background; then
// the new answer is served, without another trip. An answer that is not a
// whole 200 is never kept.
func TestMicroCacheStaleThenNew(t *testing.T) {
	s := newGameServer(t, false)
	g, next := join(t, forms[0], s, Limits{CacheSize: 1 << 20})
	clk := fixture.NewClock()
	g.setClock(clk.Now)
	st := status(300 * time.Millisecond)
	for range 3 {
		fetch(g, st, keyed, next)
	}
	if n := s.hits.Load(); n != 1 {
		t.Fatalf("three callers within the time to live: %d trips, want 1", n)
	}
	clk.Advance(350 * time.Millisecond)
	newer := strings.Replace(statusBody, `"online":1`, `"online":2`, 1)
	s.body.Store(&newer)
	if v, rec := fetch(g, st, keyed, next); v.Outcome != metrics.Cached || rec.Body.String() != statusBody {
		t.Errorf("past the time to live: %+v %s, want the stale entry at once", v, rec.Body)
	}
	fixture.WaitFor(t, "the background refresh to store what it got", func() bool { return s.hits.Load() == 2 && g.counts().Refreshing == 0 })
	if v, rec := fetch(g, st, keyed, next); v.Outcome != metrics.Cached || rec.Body.String() != newer || s.hits.Load() != 2 {
		t.Errorf("after the refresh: %+v %s after %d trips, want the new answer from the cache", v, rec.Body, s.hits.Load())
	}

	missing := newGameServer(t, false)
	missing.code.Store(http.StatusNotFound)
	g, next = join(t, form{"404", true}, missing, Limits{CacheSize: 1 << 20})
	for range 2 {
		fetch(g, st, keyed, next)
	}
	if n := missing.hits.Load(); n != 2 {
		t.Errorf("a 404 was kept: %d trips, want 2", n)
	}
}

// TestSnapshotAwareCache: a snapshot station's answer is kept until the
// backend's next snapshot is due (meta.cachedAt plus the interval), longer
// than its time to live, and no longer than the time to live when the next
// snapshot is due sooner.
func TestSnapshotAwareCache(t *testing.T) {
	for _, c := range []struct {
		name  string
		age   time.Duration // of the snapshot when it is read
		trips int32         // after a second caller 300 ms later
	}{
		{"next snapshot in 4 s", time.Second, 1},
		{"next snapshot in 10 ms", 4990 * time.Millisecond, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newGameServer(t, false)
			g, next := join(t, forms[0], s, Limits{CacheSize: 1 << 20})
			clk := fixture.NewClock()
			g.setClock(clk.Now)
			st := status(100 * time.Millisecond)
			st.Snapshot = 5 * time.Second
			body := fmt.Sprintf(`{"ok":true,"data":{"online":[]},"meta":{"version":"v1","cachedAt":%d}}`, clk.Now().Add(-c.age).UnixMilli())
			s.body.Store(&body)
			fetch(g, st, keyed, next)
			clk.Advance(300 * time.Millisecond)
			fetch(g, st, keyed, next) // a stale entry starts a refresh
			fixture.WaitFor(t, "no refresh under way", func() bool { return g.counts().Refreshing == 0 && s.hits.Load() >= c.trips })
			if n := s.hits.Load(); n != c.trips {
				t.Errorf("%d trips, want %d", n, c.trips)
			}
		})
	}
}

// TestHeldByProgress: an answer held for a keyed caller counts against its
// share while its client takes nothing for the share's patience, and no
// longer once the client takes a piece: a slow reader is judged by its
// progress, on a clock of the test's own, so that a busy machine can
// neither stretch a check past the patience nor make a sleep stand for it.
func TestHeldByProgress(t *testing.T) {
	big := `{"ok":true,"data":{"pad":"` + strings.Repeat("x", 3<<20) + `"},"meta":{"version":"v1","updatedAt":1}}`
	s := newGameServer(t, false)
	s.body.Store(&big)
	g, next := join(t, forms[0], s, Limits{MaxResponse: 4 << 20})
	clk := fixture.NewClock()
	g.setClock(clk.Now)
	bot := Caller{Keyed: true, Authenticated: true, Holder: "bot", Held: hold.Share{Bytes: 4 << 20, Patience: time.Second, Keyed: true}}
	spent := func(what string, want bool) {
		t.Helper()
		if err := g.check(bot); (err != nil) != want {
			t.Fatalf("%s: %v, want spent %v", what, err, want)
		}
	}
	gw := &gatedWriter{header: http.Header{}, writing: make(chan struct{}), grants: make(chan struct{})}
	done := make(chan Verdict, 1)
	go func() { done <- fetchTo(gw, g, status(0), bot, next) }()
	<-gw.writing // the answer is held, its first piece under way
	spent("an answer just held, not yet taken", false)
	clk.Advance(1100 * time.Millisecond)
	spent("the client took nothing for over 1 s", true)
	gw.grants <- struct{}{}
	<-gw.writing // it took a piece; the next is under way
	spent("the client just took a piece", false)
	clk.Advance(1100 * time.Millisecond)
	spent("the client took nothing since, for over 1 s", true)
	close(gw.grants)
	go func() {
		for range gw.writing {
		}
	}()
	if v := fixture.Recv(t, done, "the answer"); v.Status != 0 || !bytes.Equal(gw.body.Bytes(), []byte(big)) {
		t.Fatalf("the client that took its answer: %+v, %d of %d bytes", v, gw.body.Len(), len(big))
	}
	close(gw.writing)
	if n := g.counts().Held; n != 0 {
		t.Fatalf("held %d bytes after the answer was taken", n)
	}
	spent("after the answer was taken", false)
}

// gatedWriter is a client that takes each piece of its answer only when
// granted one (each Write says so on writing first), and everything once
// grants is closed.
type gatedWriter struct {
	header  http.Header
	writing chan struct{}
	grants  chan struct{}
	body    bytes.Buffer
}

func (w *gatedWriter) Header() http.Header { return w.header }
func (w *gatedWriter) WriteHeader(int)     {}
func (w *gatedWriter) Write(p []byte) (int, error) {
	w.writing <- struct{}{}
	<-w.grants
	return w.body.Write(p)
}

// TestGatewayCallerTakesNoPlace: the gateway's own caller (a network's
// member trips) takes no per-client place, whatever the handler's bound:
// two at once under max_per_client 1 both go on, where an address's second
// is refused.
func TestGatewayCallerTakesNoPlace(t *testing.T) {
	g, _ := join(t, forms[0], newGameServer(t, false), Limits{PerClient: 1})
	for _, c := range []struct {
		who     Caller
		refused bool
	}{{Caller{Gateway: true, Holder: "network main"}, false}, {anonymous, true}} {
		err1, err2 := g.place(c.who), g.place(c.who)
		if err1 != nil || (err2 != nil) != c.refused {
			t.Errorf("%s: %v then %v, want the second refused: %v", c.who.Holder, err1, err2, c.refused)
		}
		g.unplace(c.who)
		if err2 == nil {
			g.unplace(c.who)
		}
	}
}

// TestLimitsPutUnitsInForce: the limits a guard is joined with say which
// of its units act: off (0) is no admission control, no main-thread lane,
// no coalescing and no micro-cache; on, each has its bound.
func TestLimitsPutUnitsInForce(t *testing.T) {
	for _, c := range []struct {
		name string
		l    Limits
		on   bool
	}{
		{"off", Limits{MaxHeld: 16 << 20, MaxResponse: 1 << 20}, false},
		{"on", Limits{MaxHeld: 16 << 20, MaxResponse: 1 << 20, InFlight: 4, MainThread: 1, Coalesce: true, CacheSize: 1 << 20}, true},
	} {
		g, err := Join(Config{Name: "test/" + t.Name() + "/" + c.name, Load: 1, Limits: c.l, Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Leave)
		n := g.counts()
		if (n.All.Limit == 4) != c.on || (n.Main.Limit == 1) != c.on || (g.coalescing() != nil) != c.on || (g.caching() != nil) != c.on ||
			!c.on && (n.All.Limit != 0 || n.Main.Limit != 0) {
			t.Errorf("%s: limits %d %d, coalescing %v, caching %v", c.name, n.All.Limit, n.Main.Limit, g.coalescing() != nil, g.caching() != nil)
		}
	}
}

// TestCoalescing: identical requests at once share one trip and the same
// bytes within a class (the callers whose answer goes through the field
// layer, the keyed callers), never across classes, in both forms; a failure
// and an answer too large to hold whole are not shared, each caller making a
// trip of its own; with coalescing off nothing is shared.
func TestCoalescing(t *testing.T) {
	// ask has callers ask at once, the first at the game server and the
	// others joined to its trip or at the game server too, then lets
	// every answer go; it returns what each client got.
	ask := func(t *testing.T, g *Guard, s *gameServer, next caddyhttp.Handler, callers ...Caller) []string {
		t.Helper()
		out := make([]string, len(callers))
		var wg sync.WaitGroup
		for i, who := range callers {
			wg.Go(func() { _, rec := fetch(g, status(0), who, next); out[i] = rec.Body.String() })
		}
		fixture.WaitFor(t, "the callers to reach the game server or join a trip", func() bool {
			return int(s.hits.Load())+g.counts().Flights.Waiting == len(callers)
		})
		s.let()
		wg.Wait()
		return out
	}
	for _, f := range forms {
		t.Run("one trip per class, "+f.name, func(t *testing.T) {
			s := newGameServer(t, true)
			g, next := join(t, f, s, Limits{Coalesce: true})
			out := ask(t, g, s, next, anonymous, anonymous, anonymous, keyed, keyed)
			if n := s.hits.Load(); n != 2 {
				t.Fatalf("%d trips, want 2: one filtered, one keyed", n)
			}
			for i, body := range out {
				isKeyed := i >= 3
				if strings.Contains(body, "069a79f4") != isKeyed || body != out[map[bool]int{false: 0, true: 3}[isKeyed]] {
					t.Errorf("caller %d (keyed %v) got %s", i, isKeyed, body)
				}
			}
		})
	}
	t.Run("failures are not shared", func(t *testing.T) {
		s := newGameServer(t, true)
		s.code.Store(http.StatusInternalServerError)
		g, next := join(t, forms[0], s, Limits{Coalesce: true})
		ask(t, g, s, next, keyed, keyed, keyed)
		if n := s.hits.Load(); n != 3 {
			t.Errorf("%d trips for three callers of a failing game server, want 3", n)
		}
	})
	t.Run("answers too large to hold are not shared", func(t *testing.T) {
		s := newGameServer(t, true)
		big := `{"ok":true,"data":{"pad":"` + strings.Repeat("x", 128<<10) + `"},"meta":{}}`
		s.body.Store(&big)
		g, next := join(t, forms[0], s, Limits{Coalesce: true, MaxResponse: 64 << 10})
		for i, body := range ask(t, g, s, next, keyed, keyed) {
			if body != big {
				t.Errorf("caller %d got %d bytes, want the whole %d", i, len(body), len(big))
			}
		}
		if n := s.hits.Load(); n != 2 {
			t.Errorf("%d trips, want 2", n)
		}
	})
	t.Run("off", func(t *testing.T) {
		s := newGameServer(t, true)
		g, next := join(t, forms[0], s, Limits{})
		ask(t, g, s, next, anonymous, anonymous)
		if n := s.hits.Load(); n != 2 {
			t.Errorf("coalescing off: %d trips, want 2", n)
		}
	})
}

// bigStall is what follows statusgate in the form of 1.0, answering a large
// answer's first 100 KiB, saying so, and finishing it only when released.
type bigStall struct {
	started chan struct{}
	release chan struct{}
}

func (b *bigStall) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if _, err := io.WriteString(w, `{"ok":true,"data":{"pad":"`+strings.Repeat("x", 100<<10)); err != nil {
		return err // as reverse_proxy gives up when its client's writer fails
	}
	b.started <- struct{}{}
	<-b.release
	_, err := io.WriteString(w, `"},"meta":{}}`)
	return err
}

// TestAnonymousStreamsCapped: anonymous answers too large to hold, which
// stream with their backend slot, take at most half of max_in_flight: past
// that an anonymous caller is refused as busy (503), while a keyed caller's
// large answer still streams; once they end, their places are free again.
func TestAnonymousStreamsCapped(t *testing.T) {
	g, _ := join(t, forms[1], newGameServer(t, false), Limits{InFlight: 2, MaxResponse: 64 << 10})
	be := &bigStall{started: make(chan struct{}, 4), release: make(chan struct{})}
	var released sync.Once
	release := func() { released.Do(func() { close(be.release) }) }
	t.Cleanup(release)
	st := &Station{Name: "server"}
	done := make(chan Verdict, 2)
	go func() { v, _ := fetch(g, st, anonymous, be); done <- v }()
	<-be.started // the first anonymous stream holds half of the two slots
	second := make(chan Verdict, 1)
	go func() { v, _ := fetch(g, st, anonymous, be); second <- v }()
	select {
	case v := <-second:
		if v.Status != http.StatusServiceUnavailable || v.RetryAfter != "1" || v.Outcome != metrics.Busy {
			t.Errorf("a second anonymous stream: %+v, want busy", v)
		}
	case <-be.started:
		t.Fatal("a second anonymous stream streams beside the first")
	}
	go func() { v, _ := fetch(g, st, keyed, be); done <- v }()
	<-be.started // the keyed stream is not capped
	release()
	for range 2 {
		if v := fixture.Recv(t, done, "a stream's end"); v.Status != 0 || v.Cut {
			t.Errorf("the first anonymous or the keyed stream: %+v", v)
		}
	}
	if v, _ := fetch(g, st, anonymous, be); v.Status != 0 || g.counts().BigAnswers != 0 {
		t.Errorf("an anonymous stream after the others ended: %+v, %d places taken", v, g.counts().BigAnswers)
	}
}

// chunked is what follows statusgate in the form of 1.0, answering body in
// pieces of 4 KiB, as a backend streams a large answer.
type chunked string

func (b chunked) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	for s := string(b); s != ""; {
		n := min(4096, len(s))
		if _, err := io.WriteString(w, s[:n]); err != nil {
			return err
		}
		s = s[n:]
	}
	return nil
}

// TestHTTP10HeldOrRefused: an HTTP/1.0 client, which cannot tell a cut
// stream from a whole body, gets a filtered answer held whole with its
// length, and a 502 for one too large to hold (max_response), never a
// stream; an HTTP/1.1 client gets the same large answer filtered as it
// comes.
func TestHTTP10HeldOrRefused(t *testing.T) {
	g, _ := join(t, forms[1], newGameServer(t, false), Limits{MaxResponse: 64 << 10})
	st := &Station{Name: "player", Fields: jsonfilter.NewNames([]string{"op"})}
	small := `{"ok":true,"data":{"op":true,"a":1},"meta":{}}`
	big := `{"ok":true,"data":{"pad":"` + strings.Repeat("x", 100<<10) + `","op":true},"meta":{}}`
	ask := func(body string, major, minor int) (Verdict, *httptest.ResponseRecorder) {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/player/u", nil)
		r.ProtoMajor, r.ProtoMinor = major, minor
		r.Proto = fmt.Sprintf("HTTP/%d.%d", major, minor)
		r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, &caddyhttp.Server{})
		rec := httptest.NewRecorder()
		return g.Fetch(progress.New(rec, 0), r, g.Ticket(r, st, anonymous, r.URL.Path, nil, chunked(body))), rec
	}
	v, rec := ask(small, 1, 0)
	if v.Status != 0 || rec.Header().Get("Content-Length") != strconv.Itoa(rec.Body.Len()) || strings.Contains(rec.Body.String(), `"op":`) {
		t.Errorf("HTTP/1.0, small: %+v, Content-Length %q of %d bytes: %s", v, rec.Header().Get("Content-Length"), rec.Body.Len(), rec.Body)
	}
	v, rec = ask(big, 1, 0)
	if v.Status != http.StatusBadGateway || !errors.Is(v.Cause, errTooLargeToHold) || rec.Body.Len() != 0 {
		t.Errorf("HTTP/1.0, past max_response: %+v, %d bytes written; want its 502 and nothing sent", v, rec.Body.Len())
	}
	v, rec = ask(big, 1, 1)
	if v.Status != 0 || rec.Body.Len() < 100<<10 || strings.Contains(rec.Body.String(), `"op":`) {
		t.Errorf("HTTP/1.1, past max_response: %+v, %d bytes, want the filtered answer", v, rec.Body.Len())
	}
}

// countingRecorder counts the writes that reach the client.
type countingRecorder struct {
	*httptest.ResponseRecorder
	writes []int
}

func (c *countingRecorder) Write(p []byte) (int, error) {
	c.writes = append(c.writes, len(p))
	return c.ResponseRecorder.Write(p)
}

// TestFilteredWrites: a filtered answer within max_response is held whole
// and written with its exact length in pieces of 32 KiB (the progress
// deadline's unit, progress.Writer's piece); a larger one as a stream of
// writes of about the output buffer (outChunk), gathered rather than
// written a kept run at a time; both byte for byte what jsonfilter makes.
func TestFilteredWrites(t *testing.T) {
	const progressPiece = 32 << 10
	g, _ := join(t, forms[1], newGameServer(t, false), Limits{MaxResponse: 256 << 10})
	st := &Station{Name: "player", Fields: jsonfilter.NewNames([]string{"op"})}
	member := `{"name":"stone","op":true,"count":1834,"tps":20.0},`
	for _, n := range []int{2000, 12000} { // about 100 KiB and 600 KiB of input
		body := `{"ok":true,"data":{"list":[` + strings.Repeat(member, n) + `{}]},"meta":{"authenticated":true}}`
		want, _, err := jsonfilter.Apply(nil, []byte(body), st.Fields, jsonfilter.Options{})
		if err != nil {
			t.Fatal(err)
		}
		rec := &countingRecorder{ResponseRecorder: httptest.NewRecorder()}
		r := httptest.NewRequest(http.MethodGet, "/api/v1/player/u", nil)
		r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, &caddyhttp.Server{})
		if v := g.Fetch(progress.New(rec, 0), r, g.Ticket(r, st, anonymous, r.URL.Path, nil, chunked(body))); v.Status != 0 {
			t.Fatalf("%d members: %+v", n, v)
		}
		if !bytes.Equal(rec.Body.Bytes(), want) {
			t.Fatalf("%d members: body differs from jsonfilter.Apply", n)
		}
		cl := rec.Header().Get("Content-Length")
		last := len(rec.writes) - 1
		if len(want) <= 256<<10 {
			if cl != strconv.Itoa(len(want)) {
				t.Errorf("%d bytes held: Content-Length %q, want the exact length", len(want), cl)
			}
			for i, w := range rec.writes[:last] {
				if w != progressPiece {
					t.Errorf("held body: write %d of %d is %d bytes; want %d", i, len(rec.writes), w, progressPiece)
				}
			}
			continue
		}
		if cl != "" {
			t.Errorf("streamed body has Content-Length %q", cl)
		}
		small := 0
		for _, w := range rec.writes[:last] {
			if w < outChunk*15/16 {
				small++
			}
		}
		if small > 0 {
			t.Errorf("streamed body: %d of %d writes below %d bytes: %v", small, len(rec.writes), outChunk*15/16, rec.writes)
		}
	}
}
