package guard

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
	"github.com/statusgate/statusgate/caddymodule/jsonfilter"
	"github.com/statusgate/statusgate/internal/fixture"
)

// statusBody is what the fake game server answers /api/v1/status with: the
// plugin's envelope, with the UUIDs a filtered caller must not see.
const statusBody = `{"ok":true,"data":{"online":1,"players":[{"uuid":"069a79f4-44e9-4726-a5be-fca90e38aaf5","name":"Notch"}]},"meta":{"version":"v1","updatedAt":1}}`

// gameServer is a fake game server: it counts the requests that reach it,
// records their paths, and, when it holds its answers, answers once let
// says so (and at the test's end, whatever became of the test).
type gameServer struct {
	*httptest.Server
	hits    atomic.Int32
	mu      sync.Mutex
	paths   []string
	release chan struct{}
	once    sync.Once
	// body and code, when set, are what it answers instead of statusBody
	// and 200.
	body atomic.Pointer[string]
	code atomic.Int32
}

func newGameServer(t *testing.T, holds bool) *gameServer {
	t.Helper()
	s := &gameServer{}
	if holds {
		s.release = make(chan struct{})
	}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.mu.Lock()
		s.paths = append(s.paths, r.URL.RequestURI())
		s.mu.Unlock()
		if s.release != nil {
			<-s.release
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		body := statusBody
		if b := s.body.Load(); b != nil {
			body = *b
		}
		if code := s.code.Load(); code != 0 {
			w.WriteHeader(int(code))
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	t.Cleanup(s.let)
	return s
}

// let lets the held answers go.
func (s *gameServer) let() {
	if s.release != nil {
		s.once.Do(func() { close(s.release) })
	}
}

// form is one way a guard reaches its backend: declared (statusgate sends
// the request itself, through its own reverse_proxy) or the form of 1.0
// (the handlers after statusgate do).
type form struct {
	name    string
	declare bool
}

var forms = []form{{"declared", true}, {"1.0", false}}

// join joins a guard of its own, in form f, in front of s, with limits l
// (defaults where l says nothing), and returns it with what follows
// statusgate in that form.
func join(t *testing.T, f form, s *gameServer, l Limits) (*Guard, caddyhttp.Handler) {
	t.Helper()
	l.InFlight = cmpOr(l.InFlight, 8)
	l.Queue = cmpOr(l.Queue, 8)
	if l.Wait == 0 {
		l.Wait = 5 * time.Second
	}
	if l.MaxResponse == 0 {
		l.MaxResponse = 1 << 20
	}
	if l.MaxHeld == 0 {
		l.MaxHeld = 16 << 20
	}
	c := Config{Name: "test/" + t.Name() + "/" + f.name, Load: 1, Limits: l, Policy: "p", Logger: zap.NewNop()}
	var next caddyhttp.Handler
	if f.declare {
		b, err := upstream.Parse("proxy", json.RawMessage(`{"upstreams":[{"dial":"`+strings.TrimPrefix(s.URL, "http://")+`"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Provision(running(t)); err != nil {
			t.Fatal(err)
		}
		c.Backend, c.Scope = b, "backend "+b.Answers()
		next = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil }) // nothing after it
	} else {
		next = caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
			// What a reverse_proxy after statusgate does: the request as
			// statusgate decided it, to the game server, under its context.
			req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, s.URL+r.URL.RequestURI(), nil)
			if err != nil {
				return err
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return err
			}
			defer res.Body.Close()
			for k, vs := range res.Header {
				w.Header()[k] = vs
			}
			w.WriteHeader(res.StatusCode)
			_, err = io.Copy(w, res.Body)
			return err
		})
	}
	g, err := Join(c)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Leave)
	return g, next
}

// running is the context of a Caddy running in the test's process, with
// nothing but its config (no admin endpoint, no server): Caddy's
// reverse_proxy provisions only within one (it asks the config for its TLS
// app), as statusgate's declared backend does in a gateway.
func running(t *testing.T) caddy.Context {
	t.Helper()
	caddyOnce.Do(func() { caddyErr = caddy.Load([]byte(`{"admin":{"disabled":true}}`), false) })
	if caddyErr != nil {
		t.Fatal(caddyErr)
	}
	return caddy.ActiveContext()
}

var (
	caddyOnce sync.Once
	caddyErr  error
)

func cmpOr(v, def int) int {
	if v == 0 {
		return def
	}
	return v
}

// status is the /status station with UUIDs protected.
func status(ttl time.Duration) *Station {
	return &Station{Name: "status", CacheTTL: ttl, Fields: jsonfilter.NewNames([]string{"players"})}
}

// fetch asks g for /api/v1/status for who, as ServeHTTP would, and returns
// the verdict and what the client got.
func fetch(g *Guard, st *Station, who Caller, next caddyhttp.Handler) (Verdict, *httptest.ResponseRecorder) {
	rec := httptest.NewRecorder()
	return fetchTo(rec, g, st, who, next), rec
}

// fetchTo is fetch, its answer written to w.
func fetchTo(w http.ResponseWriter, g *Guard, st *Station, who Caller, next caddyhttp.Handler) Verdict {
	r := httptest.NewRequest(http.MethodGet, "/api/v1/status", nil)
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, &caddyhttp.Server{})
	t := g.Ticket(r, st, who, "/api/v1/status", nil, next)
	return g.Fetch(progress.New(w, 0), r, t)
}

// stalledWriter is a client that takes nothing of its answer until taking
// is closed.
type stalledWriter struct {
	header http.Header
	taking chan struct{}
}

func (w *stalledWriter) Header() http.Header { return w.header }
func (w *stalledWriter) WriteHeader(int)     {}
func (w *stalledWriter) Write(p []byte) (int, error) {
	<-w.taking
	return len(p), nil
}

// TestStaleEntryRefreshedWhileItsClientReads: a stale cache entry is
// refreshed as its caller is answered, not once its client has taken the
// answer: a client that reads slowly (or not at all, until write_timeout)
// must not leave the entry stale past its grace for everyone after it.
func TestStaleEntryRefreshedWhileItsClientReads(t *testing.T) {
	s := newGameServer(t, false)
	g, next := join(t, forms[0], s, Limits{CacheSize: 1 << 20})
	clk := fixture.NewClock()
	g.setClock(clk.Now)
	st := status(time.Second)
	if v, _ := fetch(g, st, keyed, next); v.Status != 0 || s.hits.Load() != 1 {
		t.Fatalf("the first trip: %+v, %d at the game server", v, s.hits.Load())
	}
	clk.Advance(2 * time.Second) // past the time to live, within the grace
	w := &stalledWriter{header: http.Header{}, taking: make(chan struct{})}
	done := make(chan Verdict, 1)
	go func() { done <- fetchTo(w, g, st, keyed, next) }()
	fixture.WaitFor(t, "the stale entry's refresh to reach the game server while its client takes nothing", func() bool { return s.hits.Load() == 2 })
	close(w.taking)
	if v := fixture.Recv(t, done, "the stale entry's answer"); v.Outcome != metrics.Cached {
		t.Errorf("the stale entry's caller: %+v, want it answered from the cache", v)
	}
}

var (
	anonymous = Caller{Holder: "192.0.2.1"}
	keyed     = Caller{Keyed: true, Authenticated: true, Holder: "bot", Held: hold.Share{Keyed: true}}
)

// TestFetchThroughTheDoor: in both forms, a caller without a key gets the
// game server's answer through the field layer (no UUIDs, named in
// meta.hiddenFields), a keyed caller gets its bytes as they came, and each
// trip reaches the game server as the canonical request.
func TestFetchThroughTheDoor(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			s := newGameServer(t, false)
			g, next := join(t, f, s, Limits{})
			st := status(0)

			v, rec := fetch(g, st, anonymous, next)
			if v.Status != 0 || v.Outcome != metrics.Filtered || rec.Code != http.StatusOK {
				t.Fatalf("anonymous: verdict %+v, status %d", v, rec.Code)
			}
			body := rec.Body.String()
			if strings.Contains(body, "069a79f4") || !strings.Contains(body, `"hiddenFields":["players"]`) || !strings.Contains(body, `"authenticated":false`) {
				t.Errorf("anonymous got %s", body)
			}

			v, rec = fetch(g, st, keyed, next)
			if v.Status != 0 || v.Outcome != metrics.Served || rec.Body.String() != statusBody {
				t.Errorf("keyed: verdict %+v, body %s", v, rec.Body)
			}
			if n := s.hits.Load(); n != 2 || s.paths[0] != "/api/v1/status" {
				t.Errorf("the game server saw %d requests, %q; want 2 for /api/v1/status", n, s.paths)
			}
		})
	}
}

// TestFetchOneTripForEveryone: identical requests at once share one trip,
// and a cached station's next caller is answered from the micro-cache
// without a trip, in both forms.
func TestFetchOneTripForEveryone(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			s := newGameServer(t, true)
			g, next := join(t, f, s, Limits{Coalesce: true, CacheSize: 1 << 20})
			st := status(time.Minute)

			const callers = 5
			var wg sync.WaitGroup
			verdicts := make([]Verdict, callers)
			for i := range callers {
				wg.Go(func() { verdicts[i], _ = fetch(g, st, anonymous, next) })
			}
			fixture.WaitFor(t, "four callers to follow the first one's trip", func() bool { return g.counts().Flights.Waiting == callers-1 })
			s.let()
			wg.Wait()
			if n := s.hits.Load(); n != 1 {
				t.Errorf("%d callers at once: %d trips, want 1", callers, n)
			}
			shared := 0
			for _, v := range verdicts {
				if v.Outcome == metrics.Coalesced {
					shared++
				}
			}
			if shared != callers-1 {
				t.Errorf("%d of %d callers shared the trip: %+v", shared, callers, verdicts)
			}

			v, rec := fetch(g, st, anonymous, next)
			if v.Outcome != metrics.Cached || s.hits.Load() != 1 || strings.Contains(rec.Body.String(), "069a79f4") {
				t.Errorf("the next caller: %+v after %d trips, %s", v, s.hits.Load(), rec.Body)
			}
		})
	}
}

// TestFetchPlaceHeldAtTheBackend: an anonymous client's second request
// while its first is at the backend is its own 429 (max_per_client 1),
// and a keyed caller still goes on; once the first is answered, its place
// is the client's again; in both forms.
func TestFetchPlaceHeldAtTheBackend(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			s := newGameServer(t, true)
			g, next := join(t, f, s, Limits{PerClient: 1})
			st := status(0)

			done := make(chan Verdict, 1)
			go func() { v, _ := fetch(g, st, anonymous, next); done <- v }()
			fixture.WaitFor(t, "the first request to reach the game server", func() bool { return s.hits.Load() == 1 })
			if v, _ := fetch(g, st, anonymous, next); v.Status != http.StatusTooManyRequests || v.RetryAfter != "1" {
				t.Errorf("the client's second request: %+v, want its 429", v)
			}
			go func() { v, _ := fetch(g, st, keyed, next); done <- v }()
			fixture.WaitFor(t, "the keyed request to reach the game server", func() bool { return s.hits.Load() == 2 })
			s.let()
			for range 2 {
				if v := <-done; v.Status != 0 {
					t.Errorf("a request that had its place: %+v", v)
				}
			}
			if v, _ := fetch(g, st, anonymous, next); v.Status != 0 {
				t.Errorf("the client's next request, its first answered: %+v", v)
			}
		})
	}
}

// TestGateStopsAnAnswerAfter: with a declared backend, a handler after
// statusgate that answers (a leftover respond) is refused with the fix, and
// nothing of its answer reaches the client.
func TestGateStopsAnAnswerAfter(t *testing.T) {
	s := newGameServer(t, false)
	g, _ := join(t, forms[0], s, Limits{})
	answering := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, "not the game server")
		return nil
	})
	v, rec := fetch(g, status(0), keyed, answering)
	if v.Status != http.StatusBadGateway || v.Cause != errAnsweredAfter || strings.Contains(rec.Body.String(), "not the game server") {
		t.Errorf("verdict %+v, body %q", v, rec.Body)
	}
	if n := s.hits.Load(); n != 0 {
		t.Errorf("the game server saw %d requests", n)
	}
}

// TestNothingFollows: a ticket with nothing after statusgate (the load's
// route check found that its chain ends with it) reaches a declared
// backend without a gate to run, and is refused with the fix in the form
// of 1.0, which has no way to its backend then.
func TestNothingFollows(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			s := newGameServer(t, false)
			g, _ := join(t, f, s, Limits{})
			v, rec := fetch(g, status(0), keyed, nil)
			switch {
			case f.declare && (v.Status != 0 || rec.Code != http.StatusOK || s.hits.Load() != 1):
				t.Errorf("declared backend: %+v, %d, %d trips; want its answer", v, rec.Code, s.hits.Load())
			case !f.declare && (v.Status != http.StatusBadGateway || v.Cause != errNothingAfter || s.hits.Load() != 0):
				t.Errorf("the form of 1.0: %+v, %d trips; want a 502 with the fix", v, s.hits.Load())
			}
		})
	}
}

// TestGateHeadersOfAnAbandonedTrip: what the handlers after a declared
// statusgate set on the answer (a rate limiter's headers) is written by the
// trip, which runs on past a caller who left; it is the caller's only while
// the caller still waits for the trip, and never goes into the writer of a
// caller who left, which that caller's own goroutine (the gateway's
// refusal, net/http) is using meanwhile.
func TestGateHeadersOfAnAbandonedTrip(t *testing.T) {
	s := newGameServer(t, false)
	g, _ := join(t, forms[0], s, Limits{})
	entered, after := make(chan struct{}), make(chan struct{})
	late := caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		close(entered)
		<-after
		w.Header().Set("X-After", "1")
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	r := httptest.NewRequest(http.MethodGet, "/api/v1/status", nil).WithContext(ctx)
	r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, &caddyhttp.Server{})
	tk := g.Ticket(r, status(0), keyed, "/api/v1/status", nil, late)
	rec := httptest.NewRecorder()
	go func() { <-entered; cancel() }()
	if v := g.Fetch(progress.New(rec, 0), r, tk); v.Status != http.StatusGatewayTimeout {
		t.Fatalf("a caller who left: %+v, want its refusal at once", v)
	}
	close(after)
	fixture.WaitFor(t, "the trip's end", func() bool { return s.hits.Load() == 1 && g.trips.kept.Load() == 0 })
	if v := rec.Header().Get("X-After"); v != "" {
		t.Errorf("a handler after statusgate wrote X-After: %s into the writer of a caller who had left", v)
	}
	// A caller who waits gets what they set.
	v, rec := fetch(g, status(0), keyed, caddyhttp.HandlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("X-After", "2")
		return nil
	}))
	if v.Status != 0 || rec.Header().Get("X-After") != "2" {
		t.Errorf("a caller who waited: %+v, X-After %q; want its answer with 2", v, rec.Header().Get("X-After"))
	}
}
