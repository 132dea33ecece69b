package sim

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/internal/fixture"
)

// The capacity tests run on real time, so their bounds are one-sided where
// the machine's load could stretch them: a sleep never ends early, a
// serialised queue never finishes sooner than the sum of its work.

func span(d time.Duration) Span { return Span{Min: caddy.Duration(d)} }

// provision provisions s and returns the function that unloads it, as a
// config reload or shutdown would.
func provision(t testing.TB, s *Sim) context.CancelFunc {
	t.Helper()
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := s.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	return cancel
}

// concurrently sends n GETs of target at once and returns their recorders.
func concurrently(s *Sim, n int, target string) []*httptest.ResponseRecorder {
	recs := make([]*httptest.ResponseRecorder, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() { recs[i] = do(s, "GET", target) })
	}
	wg.Wait()
	return recs
}

// With the default 8 threads, 50 concurrent requests never have more than 8
// on a thread, the rest queue, and the batch takes at least ceil(50/8)
// rounds of the station's latency. The test holds the 8 threads itself until
// all 50 are queued, so that what it checks does not depend on how fast the
// machine starts 50 goroutines: the last of 7 rounds then waits at least 6
// rounds for its thread, however busy the CPU.
func TestPoolLimit(t *testing.T) {
	seed := int64(1)
	const lat, n = 30 * time.Millisecond, 50
	s := &Sim{Seed: &seed, Name: t.Name(), Latency: map[string]Span{latencyAll: span(lat)}}
	provision(t, s)
	for range defaultThreads {
		s.pool.acquire()
	}
	var recs []*httptest.ResponseRecorder
	done := make(chan struct{})
	go func() {
		recs = concurrently(s, n, "/api/v1/status")
		close(done)
	}()
	for Lookup(t.Name()).Snapshot().Queued != n {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	for range defaultThreads {
		s.pool.release()
	}
	<-done
	elapsed := time.Since(start)
	for i, rec := range recs {
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"minecraft":`) {
			t.Fatalf("request %d: %d %.100s", i, rec.Code, rec.Body)
		}
	}
	if rounds := (n + defaultThreads - 1) / defaultThreads; elapsed < time.Duration(rounds)*lat {
		t.Errorf("%d requests took %s, less than %d rounds of %s: more than %d ran at once", n, elapsed, rounds, lat, defaultThreads)
	}
	got := Lookup(t.Name()).Snapshot()
	if got.Threads != defaultThreads || got.PeakBusy != defaultThreads {
		t.Errorf("threads %d, peak busy %d, want %d and %d", got.Threads, got.PeakBusy, defaultThreads, defaultThreads)
	}
	if got.PeakQueued != n || got.PeakInFlight != n {
		t.Errorf("peak queued %d, peak in flight %d, want %d: the flood did not queue", got.PeakQueued, got.PeakInFlight, n)
	}
	if got.Requests != n || got.Stations["status"] != (StationStats{Requests: n, PeakInFlight: n}) {
		t.Errorf("requests %d, status %+v", got.Requests, got.Stations["status"])
	}
	if got.InFlight != 0 || got.Busy != 0 || got.Queued != 0 {
		t.Errorf("after the batch: in flight %d, busy %d, queued %d", got.InFlight, got.Busy, got.Queued)
	}
	// The last of 7 rounds was queued before the first began, and waited
	// for 6 rounds to end.
	if got.QueueWaitMax < 6*lat || got.QueueWaitTotal < got.QueueWaitMax {
		t.Errorf("queue wait max %s, total %s", got.QueueWaitMax, got.QueueWaitTotal)
	}
}

// The queue is first in, first out: each waiter gets the thread in the
// order it arrived, and a thread is handed over, never left free for a
// newcomer to grab.
func TestPoolFIFO(t *testing.T) {
	p := &pool{threads: 1, stats: newStats("", 1)}
	p.acquire()
	const n = 20
	var (
		mu    sync.Mutex
		order []int
		wg    sync.WaitGroup
	)
	for i := range n {
		wg.Go(func() {
			p.acquire()
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			p.release()
		})
		// Wait until waiter i is queued before starting the next one.
		for p.stats.Snapshot().Queued != i+1 {
			time.Sleep(time.Millisecond)
		}
	}
	p.release()
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("threads went to waiters in order %v", order)
		}
	}
	if got := p.stats.Snapshot(); got.PeakBusy != 1 || got.PeakQueued != n || got.Busy != 0 || got.Queued != 0 {
		t.Errorf("stats %+v", got)
	}
}

// /placeholders work runs one task at a time on the main thread, whatever
// the number of HTTP threads, and the ticks it delays are measured.
func TestPlaceholdersSerialiseOnMainThread(t *testing.T) {
	seed := int64(1)
	const work, n = 100 * time.Millisecond, 4
	s := &Sim{Seed: &seed, Name: t.Name(), Latency: map[string]Span{latencyAll: {}, "placeholders": span(work)}}
	provision(t, s)
	st := Lookup(t.Name())
	fixture.WaitFor(t, "ticks", func() bool { return st.Snapshot().MainThread.Ticks >= 3 })
	st.Reset()

	start := time.Now()
	recs := concurrently(s, n, "/api/v1/placeholders?uuid="+alexUUID+"&p=player_name")
	elapsed := time.Since(start)
	for i, rec := range recs {
		if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), `"%player_name%":"Alex_MC"`) {
			t.Fatalf("request %d: %d %.200s", i, rec.Code, rec.Body)
		}
	}
	if elapsed < n*work {
		t.Errorf("%d placeholder requests of %s each took %s: they did not run one at a time", n, work, elapsed)
	}
	got := st.Snapshot()
	m := got.MainThread
	if m.Tasks != n || m.Work != n*work || m.Timeouts != 0 || m.Pending != 0 {
		t.Errorf("main thread %+v", m)
	}
	// However the tasks fall into ticks, the last of them starts at least
	// (n-1) tasks late, minus the ticks that would have passed anyway. The
	// tick after the last task records it, which may start after the
	// answers are back.
	minLag := n*work - n*tickInterval
	fixture.WaitFor(t, fmt.Sprintf("a tick lag of at least %s", minLag), func() bool { return st.Snapshot().MainThread.LagMax >= minLag })
	if got.Stations["placeholders"].PeakInFlight != n || got.PeakBusy != n {
		t.Errorf("placeholders held %d threads at once (peak busy %d), want %d: the HTTP threads wait for the main thread",
			got.Stations["placeholders"].PeakInFlight, got.PeakBusy, n)
	}

	// A request that fails its parameter checks never reaches the main thread.
	expectError(t, s, "GET", "/api/v1/placeholders?uuid="+alexUUID, 400, "Missing parameter: p")
	if got := st.Snapshot().MainThread.Tasks; got != n {
		t.Errorf("a refused request ran on the main thread: %d tasks", got)
	}
}

// Work that does not finish within the resolve timeout gets a 504, and the
// main thread still runs it, as the plugin does not cancel the task.
func TestPlaceholdersTimeout(t *testing.T) {
	seed := int64(1)
	s := &Sim{Seed: &seed, Name: t.Name(), ResolveTimeout: caddy.Duration(time.Millisecond),
		Latency: map[string]Span{"placeholders": span(300 * time.Millisecond)}}
	provision(t, s)
	if s.timeout != minResolveTimeout {
		t.Errorf("resolve timeout %s, want the plugin's floor %s", s.timeout, minResolveTimeout)
	}
	target := "/api/v1/placeholders?uuid=" + alexUUID + "&p=player_name"
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			expectError(t, s, "GET", target, http.StatusGatewayTimeout, "Placeholder resolution timed out (main thread busy)")
		})
	}
	wg.Wait()
	st := Lookup(t.Name())
	if got := st.Snapshot().MainThread.Timeouts; got != 2 {
		t.Errorf("timeouts %d, want 2", got)
	}
	// Each task delays the tick after it by at least its length less one
	// tick, whether the two reached the thread together or not (a busy
	// machine may deliver the second request late), unless the loop fell so
	// far behind that it skipped ticks. The tick after a task records it,
	// which may start after the task is counted.
	fixture.WaitFor(t, "the abandoned work to run and delay the ticks after it", func() bool {
		m := st.Snapshot().MainThread
		return m.Tasks == 2 && (m.LagMax >= 300*time.Millisecond-tickInterval || m.SkippedTicks > 0)
	})
}

// /player is slow for a player who is not online and fast otherwise.
func TestPlayerLatency(t *testing.T) {
	seed := int64(1)
	const slow = 200 * time.Millisecond
	s := &Sim{Seed: &seed, Latency: map[string]Span{latencyAll: {}, latencyPlayerOffline: span(slow)}}
	provision(t, s)
	now := s.clock()
	player := s.w.stationByName["player"]
	for rest, want := range map[string]string{
		alexUUID:    "player",         // always online
		grieferUUID: "player_offline", // never online
		unknownUUID: "player_offline", // never seen: still looked up
		"not-uuid":  "player",         // refused before any lookup
		"":          "player",
	} {
		if got := s.latencyKey(player, rest, now); got != want {
			t.Errorf("latencyKey(player, %q) = %s, want %s", rest, got, want)
		}
	}
	if got := s.latencyKey(s.w.index, "", now); got != "index" {
		t.Errorf("index key %s", got)
	}
	start := time.Now()
	if rec := do(s, "GET", "/api/v1/player/"+grieferUUID); rec.Code != http.StatusOK {
		t.Fatalf("griefer: %d", rec.Code)
	}
	if elapsed := time.Since(start); elapsed < slow {
		t.Errorf("offline player answered in %s, before its %s latency", elapsed, slow)
	}
}

// Every station has a default latency, and the defaults follow the
// plugin: snapshot stations fast, an offline player up to about 1.4 s,
// placeholders up to the 2 s resolve timeout.
func TestDefaultLatency(t *testing.T) {
	w := newWorld(1, frozenAt, "global")
	for _, st := range w.stations {
		if _, ok := defaultLatency[st.name]; !ok {
			t.Errorf("station %s has no default latency", st.name)
		}
		if sp := defaultLatency[st.name]; st.snapshot > 0 && (sp.Min > caddy.Duration(time.Millisecond) || sp.Max > sp.Min) {
			t.Errorf("snapshot station %s: default %v is not fast", st.name, sp)
		}
	}
	if got := defaultLatency[latencyPlayerOffline]; time.Duration(got.Max) != 1400*time.Millisecond {
		t.Errorf("offline player %v", got)
	}
	if got := defaultLatency["placeholders"]; time.Duration(got.Max) != defaultResolveTimeout {
		t.Errorf("placeholders %v", got)
	}
	table := latencyTable(map[string]Span{latencyAll: span(time.Second), "status": span(time.Millisecond)})
	if table["status"] != span(time.Millisecond) || table["player_offline"] != span(time.Second) || len(table) != len(defaultLatency) {
		t.Errorf("'*' then specific keys: %v", table)
	}
	for range 100 {
		if d := (Span{Min: caddy.Duration(time.Millisecond), Max: caddy.Duration(3 * time.Millisecond)}).draw(); d < time.Millisecond || d > 3*time.Millisecond {
			t.Fatalf("draw %s outside [1ms, 3ms]", d)
		}
	}
}

func TestValidateCapacity(t *testing.T) {
	for _, tc := range []struct {
		s    Sim
		want string
	}{
		{Sim{Threads: -1}, "threads must be at least 1, got -1"},
		{Sim{ResolveTimeout: -1}, "resolve_timeout must not be negative"},
		{Sim{Latency: map[string]Span{"nope": {}}}, "latency: unknown station 'nope'"},
		{Sim{Latency: map[string]Span{"status": {Min: -1}}}, "latency status: must not be negative"},
		{Sim{Latency: map[string]Span{"player": {Min: caddy.Duration(time.Second), Max: caddy.Duration(time.Millisecond)}}},
			"latency player: maximum 1ms is below minimum 1s"},
	} {
		if err := tc.s.Validate(); err == nil || err.Error() != tc.want {
			t.Errorf("%+v: error %v, want %q", tc.s, err, tc.want)
		}
	}
}

// The counters are served at /_sim/stats only when asked for, outside the
// worker pool and the counters themselves.
func TestStatsEndpoint(t *testing.T) {
	seed := int64(1)
	s := &Sim{Seed: &seed, StatsEndpoint: true, Name: t.Name(), Latency: map[string]Span{latencyAll: {}}}
	provision(t, s)
	do(s, "GET", "/api/v1/status")
	do(s, "GET", "/api/v1/nothing")
	do(s, "GET", "/elsewhere")
	do(s, "GET", "/api")

	read := func(method string) Snapshot {
		t.Helper()
		rec := do(s, method, statsPath)
		if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s %s: %d %s", method, statsPath, rec.Code, rec.Body)
		}
		var got Snapshot
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	got := read("GET")
	want := map[string]StationStats{"status": {1, 0, 1}, "other": {2, 0, 1}, "index": {1, 0, 1}}
	if got.Name != t.Name() || got.Requests != 4 || len(got.Stations) != 3 {
		t.Errorf("snapshot %+v", got)
	}
	for k, v := range want {
		if got.Stations[k] != v {
			t.Errorf("station %s: %+v, want %+v", k, got.Stations[k], v)
		}
	}
	if got := read("POST"); got.Requests != 4 {
		t.Errorf("POST answered %d requests, want the 4 before the reset", got.Requests)
	}
	if got := read("GET"); got.Requests != 0 || len(got.Stations) != 0 {
		t.Errorf("after reset: %+v", got)
	}
	if rec := do(s, "DELETE", statsPath); rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("DELETE: %d", rec.Code)
	}

	off := seeded(t, 1)
	if rec := do(off, "GET", statsPath); rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "No context found") {
		t.Errorf("without stats_endpoint: %d %s", rec.Code, rec.Body)
	}
}

// Lookup finds the newest sim of a name; unloading an old config does not
// take the name from its successor.
func TestLookupAcrossReload(t *testing.T) {
	name := t.Name()
	old := &Sim{Name: name, Latency: map[string]Span{latencyAll: {}}}
	cancelOld := provision(t, old)
	if Lookup(name) != old.stats {
		t.Fatal("Lookup does not find the sim")
	}
	cur := &Sim{Name: name, Latency: map[string]Span{latencyAll: {}}}
	cancelCur := provision(t, cur)
	cancelOld()
	time.Sleep(20 * time.Millisecond)
	if Lookup(name) != cur.stats {
		t.Fatal("the unloaded sim took the name from its successor")
	}
	cancelCur()
	fixture.WaitFor(t, "unregister", func() bool { return Lookup(name) == nil })
}

// Unloading the config drains the queue at once: nobody waits out a long
// latency or a main thread that is gone.
func TestUnloadDrains(t *testing.T) {
	seed := int64(1)
	s := &Sim{Seed: &seed, Threads: 1, Name: t.Name(),
		Latency: map[string]Span{latencyAll: span(time.Minute)}, ResolveTimeout: caddy.Duration(time.Minute)}
	cancel := provision(t, s)
	done := make(chan int, 3)
	for _, target := range []string{"/api/v1/status", "/api/v1/server", "/api/v1/placeholders?uuid=" + alexUUID + "&p=x"} {
		go func() { done <- do(s, "GET", target).Code }()
	}
	fixture.WaitFor(t, "the requests to arrive", func() bool { return s.stats.Snapshot().InFlight == 3 })
	cancel()
	for range 3 {
		select {
		case code := <-done:
			if code != http.StatusOK {
				t.Errorf("drained request: %d", code)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("a request still waits after the unload")
		}
	}
	if rec := do(s, "GET", "/api/v1/placeholders?uuid="+alexUUID+"&p=x"); rec.Code != http.StatusOK {
		t.Errorf("placeholders after the unload: %d", rec.Code)
	}
}
