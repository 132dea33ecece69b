package network

// The figures of docs/performance.md's "The game metrics": what scrapes
// cost each server, and how long a scrape takes with one server hung.
// Minutes of measuring, so only with STATUSGATE_MEASURE=1:
//
//	STATUSGATE_MEASURE=1 go test -count=1 -v -run TestGameMetricsCost ./test/network/

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/sim"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

func TestGameMetricsCost(t *testing.T) {
	if os.Getenv("STATUSGATE_MEASURE") == "" {
		t.Skip("measures for minutes: STATUSGATE_MEASURE=1")
	}
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	creative := newDoor(t, ms[2].Addr())
	addrs := map[string]string{"survival": ms[0].Addr(), "lobby": ms[1].Addr(), "creative": creative.addr}
	var sites []string
	for i, m := range ms {
		sites = append(sites, simSite(m, i, true))
	}
	LoadCaddyfile(t, gameConfig([]string{"survival", "lobby", "creative"}, addrs, sites...))
	const window = time.Minute
	var table strings.Builder
	fmt.Fprintf(&table, "| scrapers (each every 1 s) | scrapes | status | performance | entities | worlds | server | all five |\n|---|---|---|---|---|---|---|---|\n")
	for _, scrapers := range []int{0, 1, 20} {
		for _, m := range ms {
			sim.Lookup(m.Name).Reset()
		}
		stop := time.Now().Add(window)
		var wg sync.WaitGroup
		var mu sync.Mutex
		scrapes := 0
		for range scrapers {
			wg.Go(func() {
				for time.Now().Before(stop) {
					scrapeAll(t)
					mu.Lock()
					scrapes++
					mu.Unlock()
					time.Sleep(time.Second) // a scraper's interval
				}
			})
		}
		if scrapers == 0 {
			time.Sleep(window) // nobody scrapes: the window passes with nothing asked
		}
		wg.Wait()
		st := sim.Lookup(ms[0].Name).Snapshot()
		var all int64
		row := fmt.Sprintf("| %d | %d |", scrapers, scrapes)
		for _, ep := range []string{"status", "performance", "entities", "worlds", "server"} {
			n := st.Stations[ep].Requests
			all += n
			row += fmt.Sprintf(" %d |", n)
		}
		fmt.Fprintf(&table, "%s %d |\n", row, all)
	}
	t.Logf("requests to survival per minute:\n%s", table.String())

	// creative hangs: every request held until the test ends.
	creative.stuck.Store(true)
	var took []time.Duration
	for range 20 {
		start := time.Now()
		scrapeAll(t)
		took = append(took, time.Since(start))
		time.Sleep(time.Second)
	}
	slices.Sort(took)
	t.Logf("scrape durations with creative hung, 20 scrapes 1 s apart: min %v, median %v, max %v", took[0], took[len(took)/2], took[len(took)-1])
	creative.stuck.Store(false)
}
