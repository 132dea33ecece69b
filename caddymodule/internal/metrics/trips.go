package metrics

import "github.com/prometheus/client_golang/prometheus"

// Trips is what a guard counts of its trips to the backend that outlive
// their callers: the backend works off every request it was sent, so a
// trip whose caller's budget ended, or whose client left, keeps its places
// until the backend answers or the guard's patience is over.
type Trips interface{ TripStats() TripStats }

// TripStats is a snapshot of a guard's Trips.
type TripStats struct {
	// Kept is how many trips nobody waits for are at the backend now.
	Kept int
	// Counters since the guard was made, of the trips kept past their
	// callers that have ended: Answered those that ended before the
	// guard's patience did (the backend answered, or failed, or the
	// gateway stopped), GivenUp those given up at the end of the patience;
	// and Unsent, the requests not sent because what was left of their
	// budget could not cover the backend's answer time.
	Answered, GivenUp, Unsent uint64
}

var (
	descTripsKept = guardDesc("backend_trips_kept",
		"Requests at the backend that nobody waits for any more (their budget ended or their client left), by guard: they keep their places until the backend answers.")
	descTripsKeptTotal = guardDesc("backend_trips_kept_total",
		"Requests kept at the backend past their callers that have ended, by guard and end: answered (the backend answered or failed before the guard's patience was over), or given_up at the end of the patience.", "end")
	descUnsent = guardDesc("backend_requests_unsent_total",
		"Requests answered 504 without being sent, by guard: what was left of their budget could not cover the backend's quickest recent answer of the endpoint.")
)

// addTrips adds g's trip counts to s.
func (s *guardSums) addTrips(g Guard) {
	if g.Trips == nil {
		return
	}
	s.hasTrips = true
	st := g.Trips.TripStats()
	s.trips.Kept += st.Kept
	s.trips.Answered += st.Answered
	s.trips.GivenUp += st.GivenUp
	s.trips.Unsent += st.Unsent
}

// collectTrips exports the trip counts of the guard name.
func collectTrips(ch chan<- prometheus.Metric, name string, s *guardSums) {
	if !s.hasTrips {
		return
	}
	ch <- prometheus.MustNewConstMetric(descTripsKept, prometheus.GaugeValue, float64(s.trips.Kept), name)
	ch <- prometheus.MustNewConstMetric(descTripsKeptTotal, prometheus.CounterValue, float64(s.trips.Answered), name, "answered")
	ch <- prometheus.MustNewConstMetric(descTripsKeptTotal, prometheus.CounterValue, float64(s.trips.GivenUp), name, "given_up")
	ch <- prometheus.MustNewConstMetric(descUnsent, prometheus.CounterValue, float64(s.trips.Unsent), name)
}
