package caddymodule

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"go.uber.org/zap/zaptest/observer"

	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
)

// sameGuard reports whether a and b count at one guard: the same slots,
// queue, held bytes and cache, as the guard's metrics and the game metrics
// tell guards apart (guardKey).
func sameGuard(a, b *guard.Guard) bool { return guardKey(a) == guardKey(b) }

// sameAnswers reports whether a and b share their answers: one request,
// by one caller, is shared under one name at both.
func sameAnswers(a, b *guard.Guard) bool {
	share := func(g *guard.Guard) string {
		r := httptest.NewRequest("GET", "/api/v1/status", nil)
		return g.Ticket(r, &guard.Station{Name: "status", CacheTTL: time.Second}, guard.Caller{Holder: "192.0.2.1"}, r.URL.Path, nil, nil).Share
	}
	return share(a) == share(b)
}

// units are what h's guard has on, as its metrics read them: the counts a
// test waits on (a request reaching a place) read as the metrics read them.
func units(h *Handler) metrics.Guard { return h.guard.Units("", h.guard.Limits()) }

// loggedErrors counts the lines of logs whose error holds text: what an
// operator reads of a cause.
func loggedErrors(logs *observer.ObservedLogs, text string) int {
	n := 0
	for _, e := range logs.All() {
		if err, ok := e.ContextMap()["error"]; ok && strings.Contains(fmt.Sprint(err), text) {
			n++
		}
	}
	return n
}
