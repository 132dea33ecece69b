package guard

import (
	"net/http"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/statusgate/statusgate/internal/fixture"
)

// TestAnswerTimesFloor: the floor is the quickest of the last eight
// answers of the last minute; older ones and those pushed out count for
// nothing, and with none the floor is 0 (every request is sent).
func TestAnswerTimesFloor(t *testing.T) {
	var a answerTimes
	now := time.Unix(1_800_000_000, 0)
	if f := a.floor(now); f != 0 {
		t.Fatalf("no answers: floor %v, want 0", f)
	}
	a.add(300*time.Millisecond, now.Add(-2*answerMemory)) // forgotten
	a.add(900*time.Millisecond, now.Add(-time.Second))
	a.add(1400*time.Millisecond, now)
	if f := a.floor(now); f != 900*time.Millisecond {
		t.Errorf("floor %v, want the quickest recent answer, 900ms", f)
	}
	a.add(0, now) // an instant answer counts too
	if f := a.floor(now); f != 0 {
		t.Errorf("floor %v after an instant answer, want 0", f)
	}
	for range len(a.last) {
		a.add(2*time.Second, now)
	}
	if f := a.floor(now); f != 2*time.Second {
		t.Errorf("floor %v after eight answers of 2s, want 2s", f)
	}
	if f := a.floor(now.Add(answerMemory + time.Second)); f != 0 {
		t.Errorf("floor %v once every answer is older than %v, want 0", f, answerMemory)
	}
}

// keptTrip fetches /status for an anonymous caller from a game server that
// holds its answers, with a budget shorter than the wait: the caller gets
// its 504, and the trip is kept with its slot.
func keptTrip(t *testing.T, f form) (*Guard, *gameServer, caddyhttp.Handler) {
	t.Helper()
	s := newGameServer(t, true)
	g, next := join(t, f, s, Limits{InFlight: 1, Timeout: 50 * time.Millisecond})
	if v, _ := fetch(g, status(0), anonymous, next); v.Status != http.StatusGatewayTimeout {
		t.Fatalf("a request at a game server that does not answer: %+v, want 504", v)
	}
	if st := g.trips.TripStats(); st.Kept != 1 || g.counts().All.InFlight != 1 || s.hits.Load() != 1 {
		t.Fatalf("after the budget's end: %+v kept, %d in flight, %d at the game server; want the trip kept with its slot",
			st, g.counts().All.InFlight, s.hits.Load())
	}
	return g, s, next
}

// TestPatienceGivesUpAHungTrip: a trip nobody waits for keeps its slot
// (another caller's request is not sent), until the patience ends it, and
// the slot is back.
func TestPatienceGivesUpAHungTrip(t *testing.T) {
	defer func(p time.Duration) { patience = p }(patience)
	patience = 100 * time.Millisecond
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			g, s, next := keptTrip(t, f)
			if v, _ := fetch(g, status(0), keyed, next); v.Status != http.StatusGatewayTimeout || s.hits.Load() != 1 {
				t.Errorf("beside the kept trip: %+v, %d at the game server; want 504 and 1", v, s.hits.Load())
			}
			fixture.WaitFor(t, "the patience to end the trip", func() bool {
				st := g.trips.TripStats()
				return st.Kept == 0 && st.GivenUp == 1 && g.counts().All.InFlight == 0
			})
		})
	}
}

// TestStopEndsKeptTrips: the guard's end (its last handler gone: a stop)
// ends the trips nobody waits for, before their patience.
func TestStopEndsKeptTrips(t *testing.T) {
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			g, _, _ := keptTrip(t, f)
			state := g.guardState
			g.Leave()
			fixture.WaitFor(t, "the stop to end the trip", func() bool {
				st := state.trips.TripStats()
				return st.Kept == 0 && st.Answered == 1 && st.GivenUp == 0 && state.all.Stats().InFlight == 0
			})
		})
	}
}

// TestDestructKeepsAGuardInUse: the end of one name's use of a guard that a
// handler of another load still uses (a reload that renamed it and took
// it over) ends none of its trips; the end of its last use does.
func TestDestructKeepsAGuardInUse(t *testing.T) {
	s := newGuardState(Limits{MaxHeld: 1 << 20, MaxResponse: 1 << 16})
	s.use(1, Limits{MaxHeld: 1 << 20, MaxResponse: 1 << 16})
	if err := (pooled{s}).Destruct(); err != nil || s.stopping.Err() != nil {
		t.Fatalf("Destruct of a guard in use: %v, stopping %v; want it going on", err, s.stopping.Err())
	}
	s.leave(1)
	if err := (pooled{s}).Destruct(); err != nil || s.stopping.Err() == nil {
		t.Errorf("Destruct of a guard nobody uses: %v, stopping %v; want its trips ended", err, s.stopping.Err())
	}
}
