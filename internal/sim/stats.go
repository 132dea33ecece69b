package sim

import (
	"encoding/json"
	"maps"
	"net/http"
	"sync"
	"time"
)

// Stats counts what the simulated backend went through: how many requests
// it held at once, how long they queued for a thread, and how late the game
// ticks ran. It is what a load test reads to judge a gateway by its effect
// on the backend, without going through the gateway. Get one with Lookup.
type Stats struct {
	name string

	mu   sync.Mutex
	snap Snapshot // counters; maps and durations kept current under mu
}

// Snapshot is a copy of a Stats at one instant. Peaks and totals count from
// Since (provision or the last Reset); the "now" fields are current. JSON
// durations are nanoseconds.
type Snapshot struct {
	Name    string    `json:"name"`
	Since   time.Time `json:"since"`
	Threads int       `json:"threads"` // size of the worker pool

	// The worker pool. InFlight = Busy + Queued: every request the
	// backend has accepted and not answered, which is what a gateway's
	// concurrency limit bounds. Busy never exceeds Threads.
	InFlight     int `json:"in_flight"`
	Busy         int `json:"busy"`
	Queued       int `json:"queued"`
	PeakInFlight int `json:"peak_in_flight"`
	PeakBusy     int `json:"peak_busy"`
	PeakQueued   int `json:"peak_queued"`

	Requests int64 `json:"requests"` // accepted, whatever the answer
	// QueueWaitMax and QueueWaitTotal are the time requests spent waiting
	// for a thread; QueueWaitTotal/Requests is the mean.
	QueueWaitMax   time.Duration `json:"queue_wait_max_ns"`
	QueueWaitTotal time.Duration `json:"queue_wait_total_ns"`

	// Stations counts per station name ("index" for the endpoint index,
	// "other" for requests that reach no station).
	Stations map[string]StationStats `json:"stations"`

	MainThread MainThreadStats `json:"main_thread"`
}

// StationStats counts the requests of one station.
type StationStats struct {
	Requests     int64 `json:"requests"`
	InFlight     int   `json:"in_flight"` // queued or on a thread
	PeakInFlight int   `json:"peak_in_flight"`
}

// MainThreadStats describes the simulated game loop.
type MainThreadStats struct {
	Ticks int64 `json:"ticks"`
	// LagLast and LagMax are how late ticks started against the 20 TPS
	// schedule: the last tick's and the worst since Since.
	LagLast time.Duration `json:"lag_last_ns"`
	LagMax  time.Duration `json:"lag_max_ns"`
	// SkippedTicks are ticks given up after the loop fell more than 2 s
	// behind, as the server's "Can't keep up!" does.
	SkippedTicks int64 `json:"skipped_ticks"`
	// Tasks is the /placeholders work that has run on the main thread,
	// Work its total duration, Pending the tasks waiting for the next tick.
	Tasks       int64         `json:"tasks"`
	Work        time.Duration `json:"work_ns"`
	Pending     int           `json:"pending"`
	PeakPending int           `json:"peak_pending"`
	// Timeouts counts /placeholders answers of 504 because the work had not
	// run within the resolve timeout (the work still runs later).
	Timeouts int64 `json:"timeouts"`
}

// stationOther is the Stations key of requests that reach no station.
const stationOther = "other"

func newStats(name string, threads int) *Stats {
	s := &Stats{name: name}
	s.snap = Snapshot{Name: name, Threads: threads, Since: time.Now(), Stations: map[string]StationStats{}}
	return s
}

// Name is the name the Stats is registered under.
func (s *Stats) Name() string { return s.name }

// Snapshot returns a copy of the counters.
func (s *Stats) Snapshot() Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.snap
	c.Stations = maps.Clone(s.snap.Stations)
	return c
}

// Reset starts a new measurement: totals go to zero and peaks to the
// current values, so that a test can measure one phase of a longer run.
func (s *Stats) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
}

func (s *Stats) resetLocked() {
	old := s.snap
	s.snap = Snapshot{
		Name: old.Name, Threads: old.Threads, Since: time.Now(),
		InFlight: old.InFlight, Busy: old.Busy, Queued: old.Queued,
		PeakInFlight: old.InFlight, PeakBusy: old.Busy, PeakQueued: old.Queued,
		Stations: map[string]StationStats{},
		MainThread: MainThreadStats{
			LagLast: old.MainThread.LagLast, Pending: old.MainThread.Pending, PeakPending: old.MainThread.Pending,
		},
	}
	for k, v := range old.Stations {
		if v.InFlight > 0 {
			s.snap.Stations[k] = StationStats{InFlight: v.InFlight, PeakInFlight: v.InFlight}
		}
	}
}

// arrive counts a request the backend has accepted.
func (s *Stats) arrive(station string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.Requests++
	s.snap.InFlight++
	s.snap.PeakInFlight = max(s.snap.PeakInFlight, s.snap.InFlight)
	st := s.snap.Stations[station]
	st.Requests++
	st.InFlight++
	st.PeakInFlight = max(st.PeakInFlight, st.InFlight)
	s.snap.Stations[station] = st
}

// leave counts a request answered.
func (s *Stats) leave(station string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.InFlight--
	st := s.snap.Stations[station]
	st.InFlight--
	s.snap.Stations[station] = st
}

// pool records the pool's occupancy; the pool calls it under its own lock,
// so the peaks are exact.
func (s *Stats) pool(busy, queued int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.Busy, s.snap.Queued = busy, queued
	s.snap.PeakBusy = max(s.snap.PeakBusy, busy)
	s.snap.PeakQueued = max(s.snap.PeakQueued, queued)
}

func (s *Stats) waited(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.QueueWaitTotal += d
	s.snap.QueueWaitMax = max(s.snap.QueueWaitMax, d)
}

func (s *Stats) tick(lag time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &s.snap.MainThread
	m.Ticks++
	m.LagLast = lag
	m.LagMax = max(m.LagMax, lag)
}

func (s *Stats) skipped(n int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.MainThread.SkippedTicks += n
}

func (s *Stats) mainPending(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := &s.snap.MainThread
	m.Pending = n
	m.PeakPending = max(m.PeakPending, n)
}

func (s *Stats) taskRun(work time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.MainThread.Tasks++
	s.snap.MainThread.Work += work
}

func (s *Stats) timeout() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.snap.MainThread.Timeouts++
}

// serveHTTP answers GET with the snapshot as JSON; POST resets the counters
// and answers with the snapshot taken just before.
func (s *Stats) serveHTTP(w http.ResponseWriter, r *http.Request) {
	var snap Snapshot
	switch r.Method {
	case http.MethodGet:
		snap = s.Snapshot()
	case http.MethodPost:
		s.mu.Lock()
		snap = s.snap // resetLocked replaces the Stations map, so no clone
		s.resetLocked()
		s.mu.Unlock()
	default:
		w.Header().Set("Allow", "GET, POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	b, _ := json.Marshal(snap)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// The registry lets a test find a sim's Stats by the sim's name without
// holding the module: Caddy provisions it from config.
var registry = struct {
	sync.Mutex
	m map[string]*Stats
}{m: map[string]*Stats{}}

// Lookup returns the Stats of the most recently provisioned sim named
// name (the `name` option; "" when unset), or nil if there is none. A config
// reload provisions a new sim and so a fresh Stats under the same name.
func Lookup(name string) *Stats {
	registry.Lock()
	defer registry.Unlock()
	return registry.m[name]
}

func register(s *Stats) {
	registry.Lock()
	defer registry.Unlock()
	registry.m[s.name] = s
}

// unregister removes s unless a newer sim has taken its name.
func unregister(s *Stats) {
	registry.Lock()
	defer registry.Unlock()
	if registry.m[s.name] == s {
		delete(registry.m, s.name)
	}
}
