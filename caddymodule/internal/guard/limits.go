package guard

import (
	"time"
)

// Limits is BackendConfig resolved: defaults applied, off as 0. The
// handlers of one config that share a guard give it the same server limits
// (Server); the newest config's are in force (guardState.use).
type Limits struct {
	InFlight, MainThread, PerClient, Queue int
	Wait, Timeout                          time.Duration
	Coalesce                               bool
	CacheSize, MaxResponse, MaxHeld        int64
	// Instances is how many gateways share the backend; the limits above
	// are this one's share (PerInstance).
	Instances int
	// Streams bounds the live streams, Topics what they poll
	// (LiveConfig): their seats are the guard's; how many one client may
	// open is each handler's (max_streams_per_client).
	Streams, Topics int
}

// Server is l less the front door's choices: what the backend's guard
// shares among every handler in front of it (its slots, queue, main-thread
// lane, held bytes, cache, streams and topics), on which they must agree.
// How many places one client may take (max_per_client, and
// max_streams_per_client for streams), a request's budget (timeout) and
// whether identical requests share a trip (coalesce) are each handler's
// own: a public site and a staff dashboard in front of
// one server may choose differently, and still count at one guard.
func (l Limits) Server() Limits {
	l.PerClient, l.Timeout, l.Coalesce = 0, 0, false
	return l
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
