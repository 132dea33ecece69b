package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
)

// busyBackend answers every request after a moment, counting how many it
// works on at once.
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

// TestLiveLimitsUnderLoad provisions and cleans up handlers of newer loads
// with other limits (max_in_flight, the cache, coalescing) on one guard while
// requests flow through the oldest: nobody is refused or lost, the backend
// never sees more than the highest limit in force, and once the newer loads
// are gone the oldest load's limits are in force again. Run with -race.
func TestLiveLimitsUnderLoad(t *testing.T) {
	const base = "guard live\nmax_per_client off\nqueue 64 1m\ntimeout off"
	h0, _ := newTestHandler(t, base+"\nmax_in_flight 4")
	be := &busyBackend{}
	var wg sync.WaitGroup
	var refused atomic.Int32
	for w := range 16 {
		wg.Go(func() {
			for i := range 30 {
				r := serve(t, h0, be, "GET", fmt.Sprintf("/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df?w=%d&i=%d", w, i), nil)
				if r.Code != 200 {
					refused.Add(1)
				}
			}
		})
	}
	for i := range 30 {
		block := fmt.Sprintf("statusgate {\n%s\nmax_in_flight %d\ncoalesce %v\n%s\n}", base, 2+i%3, i%2 == 0, []string{"cache_size off", "cache_size 1MiB"}[i%2])
		h := new(Handler)
		if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
		if err := h.provisionWith(ctx, zap.NewNop()); err != nil {
			t.Fatal(err)
		}
		if !sameGuard(h.guard, h0.guard) {
			t.Fatal("a newer load of the named guard got another guard")
		}
		if r := serve(t, h, be, "GET", "/api/v1/status?reload="+fmt.Sprint(i), nil); r.Code != 200 {
			t.Errorf("through the newer load: %d", r.Code)
		}
		_ = h.Cleanup()
		cancel()
	}
	wg.Wait()
	if n := refused.Load(); n != 0 {
		t.Errorf("%d requests refused or lost across the limit changes", n)
	}
	if p := be.peak.Load(); p > 4 {
		t.Errorf("backend peak %d, above the highest max_in_flight in force, 4", p)
	}
	if l := h0.guard.Limits(); l.InFlight != 4 || !l.Coalesce || l.CacheSize == 0 {
		t.Errorf("after the newer loads left: %+v in force, want the oldest load's", l)
	}
}
