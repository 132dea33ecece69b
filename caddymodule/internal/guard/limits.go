package guard

import (
	"time"
)

// Limits is BackendConfig resolved: defaults applied, off as 0. Each
// field's option tag names the backend option it resolves, whose
// declaration says whether it is the server's (on which the handlers of
// one config that share a guard agree) or each handler's front door's;
// the newest config's limits are in force (guardState.use).
type Limits struct {
	InFlight    int           `option:"max_in_flight"`
	MainThread  int           `option:"max_main_thread"`
	PerClient   int           `option:"max_per_client"`
	Queue       int           `option:"queue_length"`
	Wait        time.Duration `option:"queue_wait"`
	Timeout     time.Duration `option:"timeout"`
	Coalesce    bool          `option:"coalesce"`
	CacheSize   int64         `option:"cache_size"`
	MaxResponse int64         `option:"max_response"`
	MaxHeld     int64         `option:"max_held"`
	// Instances is how many gateways share the backend; the limits above
	// are this one's share (PerInstance).
	Instances int `option:"instances"`
	// Streams bounds the live streams, Topics what they poll
	// (LiveConfig): their seats are the guard's; how many one client may
	// open is each handler's (max_streams_per_client).
	Streams int `option:"max_streams"`
	Topics  int `option:"max_topics"`
}

// ClientShare is what one client (an address, or a key without a share of
// its own) may hold of the held bytes: a sixteenth of max_held, and never
// less than max_response, which one answer may take.
func (l Limits) ClientShare() int64 {
	return min(l.MaxHeld, max(l.MaxHeld/16, l.MaxResponse))
}

// anonymousHeld is what anonymous clients may hold of the held bytes
// together: half of max_held, so that the other half is always there for
// keyed callers, whatever a flood of addresses holds (hold.Budget). An
// anonymous answer larger than it is never held whole: it streams to its
// client as one over max_response does.
func (l Limits) anonymousHeld() int64 {
	return max(1, l.MaxHeld/2)
}

// KeyShare is the most a key's default share of the held bytes is: half of
// what anonymous callers leave (a quarter of max_held), so that with
// anonymous callers at their half and any one key at its share, the other
// keys still have the rest.
func (l Limits) KeyShare() int64 {
	return max(1, (l.MaxHeld-l.anonymousHeld())/2)
}

// PerInstance is this gateway's share of the limits when it is one of k in
// front of the backend: the backend's slots, the queue in front of it and
// the held bytes divided by k, rounded down and at least 1 (off stays off).
// What bounds one client or one station is left whole: the per-client
// limits follow the client to one gateway (docs/cluster.md), and the
// main-thread lane belongs to one gateway alone.
func (l Limits) PerInstance(k int) Limits {
	share := func(v int64) int64 {
		if v <= 0 {
			return v
		}
		return max(1, v/int64(k))
	}
	l.Instances = k
	l.InFlight = int(share(int64(l.InFlight)))
	l.Queue = int(share(int64(l.Queue)))
	l.MaxHeld = share(l.MaxHeld)
	return l
}
