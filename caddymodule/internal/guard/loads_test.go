package guard

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/progress"
)

// busyBackend is what follows statusgate in the form of 1.0: it answers
// every request after a moment, counting how many it works on at once.
type busyBackend struct{ in, peak atomic.Int32 }

func (b *busyBackend) ServeHTTP(w http.ResponseWriter, _ *http.Request) error {
	n := b.in.Add(1)
	for old := b.peak.Load(); n > old && !b.peak.CompareAndSwap(old, n); old = b.peak.Load() {
	}
	time.Sleep(200 * time.Microsecond)
	b.in.Add(-1)
	w.Header().Set("Content-Type", "application/json")
	_, err := w.Write([]byte(`{"ok":true,"data":{},"meta":{}}`))
	return err
}

// TestLimitsChangeUnderLoad: handlers of newer loads join one guard with
// other limits (max_in_flight, the cache, coalescing) and leave it while
// requests flow through the oldest load's: nobody is refused or lost, the
// backend never sees more than the highest limit in force, and once the
// newer loads are gone the oldest load's limits are in force again. Run
// with -race.
func TestLimitsChangeUnderLoad(t *testing.T) {
	base := Limits{Queue: 64, Wait: time.Minute, MaxResponse: 1 << 20, MaxHeld: 16 << 20}
	join := func(load uint64, l Limits) *Guard {
		t.Helper()
		g, err := Join(Config{Name: "test/" + t.Name(), Load: load, Limits: l, Policy: "p", Logger: zap.NewNop()})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	oldest := base
	oldest.InFlight, oldest.Coalesce, oldest.CacheSize = 4, true, 16<<20
	g0 := join(1, oldest)
	t.Cleanup(g0.Leave)
	be := &busyBackend{}
	player := &Station{Name: "player"}
	get := func(g *Guard, target string) Verdict {
		r := httptest.NewRequest(http.MethodGet, target, nil)
		r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, &caddyhttp.Server{})
		tk := g.Ticket(r, player, Caller{Holder: "192.0.2.1"}, r.URL.Path, nil, be)
		return g.Fetch(progress.New(httptest.NewRecorder(), 0), r, tk)
	}
	var wg sync.WaitGroup
	var refused atomic.Int32
	for w := range 16 {
		wg.Go(func() {
			for i := range 30 {
				if v := get(g0, fmt.Sprintf("/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df?w=%d&i=%d", w, i)); v.Status != 0 {
					refused.Add(1)
				}
			}
		})
	}
	for i := range 30 {
		l := base
		l.InFlight, l.Coalesce, l.CacheSize = 2+i%3, i%2 == 0, []int64{0, 1 << 20}[i%2]
		g := join(uint64(2+i), l)
		if g.guardState != g0.guardState {
			t.Fatal("a newer load of the named guard got another guard")
		}
		if v := get(g, fmt.Sprintf("/api/v1/status?reload=%d", i)); v.Status != 0 {
			t.Errorf("through the newer load: %d", v.Status)
		}
		g.Leave()
	}
	wg.Wait()
	if n := refused.Load(); n != 0 {
		t.Errorf("%d requests refused or lost across the limit changes", n)
	}
	if p := be.peak.Load(); p > 4 {
		t.Errorf("backend peak %d, above the highest max_in_flight in force, 4", p)
	}
	if l := g0.Limits(); l != oldest {
		t.Errorf("after the newer loads left: %+v in force, want the oldest load's, %+v", l, oldest)
	}
}
