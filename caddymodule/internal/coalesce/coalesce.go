// Package coalesce lets concurrent identical backend requests share one.
//
// When many clients poll the same station at once (a status page open in a
// hundred browsers, a flood of one player's stats), the backend needs to
// answer only once: the first caller for a key, the leader, runs the request;
// the callers that ask for the same key while it runs, the followers, wait
// for it and get the very same response bytes. A key names what the response
// depends on, and must therefore include everything that makes two responses
// differ for two callers: for the gateway, the field lists in force (the
// policy), the class (filtered by the field layer, for a caller without a key
// while auth is on, or whole, the backend's bytes, for everyone else), the
// Host, and the canonical upstream path and query. A caller's key, the
// secret, is never part of it: every accepted key sees the same response.
//
// Only complete, reusable responses are shared (see Group.Do): no result (a
// failure, which the leader keeps as its own verdict), a refusal of the
// leader's caller (CallersOwn: a 401, 403, 429, ...) or a 5xx, or a
// body over the size limit is the leader's alone, and each
// follower then runs its own request as if it had never waited, so that
// coalescing never turns one caller's failure into everyone's.
//
// Contexts. A follower that gives up (its client left, its deadline passed)
// just stops waiting; the leader's request goes on. The leader's request does
// not end with the leader's context: it keeps the context's values and
// deadline but not its cancellation (context.WithoutCancel), so that the
// leader's client hanging up does not fail the followers that joined it.
// Once the leader's context has ended, the request runs on for at most
// Config.Timeout for the followers, and is cancelled as soon as no follower
// waits for it any more, because then nobody would get its answer; unless
// fn has said, with Commit, that its request has reached a backend that works
// it off whatever the callers do: then it is never cancelled for want of
// callers, and whoever asks for its key meanwhile joins it instead of making
// the backend work twice. Such a request may outlive the leader's fn (Hand):
// the leader's budget ends, the leader leaves, and the request's own end
// gives its answer to the followers.
package coalesce

import (
	"cmp"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

const (
	// DefaultTimeout bounds how long a leader's request runs on for its
	// followers after the leader's own context ended: the longest wait for
	// admission (2 s) plus the slowest station (about 2 s for /placeholders),
	// with headroom for the proxy's own dial and response timeouts, which
	// normally end a hung request first.
	DefaultTimeout = 10 * time.Second
)

// Result is a complete backend response that callers can share. The Group
// hands the same *Result to the leader and every follower that shares it, so
// nobody may modify it, its Header or its Body after fn returns it.
type Result struct {
	// Status is the HTTP status code.
	Status int
	// Header is the subset of the response's header that the caller wants
	// to replay to the clients; fn decides which.
	Header http.Header
	// Body is the whole body, as the clients get it.
	Body []byte
	// Followers is how many followers got this Result: the Group sets it for
	// the leader, who owns the Result alone when it is 0 (and may then reuse
	// its memory, if it kept it nowhere else).
	Followers int
}

// Outcome is how a Do call got its result.
type Outcome uint8

const (
	// Led: the caller was the leader and ran its own fn.
	Led Outcome = iota
	// Shared: the caller followed a leader and got its Result.
	Shared
	// Alone: the caller followed a leader whose result could not be
	// shared, and then ran its own fn.
	Alone
	// Abandoned: the caller's context ended while it waited for a leader;
	// Do returned no result and ran nothing.
	Abandoned
)

// String returns "led", "shared", "alone" or "abandoned", for logs and
// metric labels.
func (o Outcome) String() string {
	switch o {
	case Led:
		return "led"
	case Shared:
		return "shared"
	case Alone:
		return "alone"
	case Abandoned:
		return "abandoned"
	}
	return fmt.Sprintf("Outcome(%d)", o)
}

// Config sets a Group's limits. Zero fields take their defaults.
type Config struct {
	// MaxBody is the largest body, in bytes, that is shared; the gateway
	// gives the largest answer it holds whole (max_response), since one it
	// streams cannot be shared. Default: 0, no bound of its own.
	MaxBody int
	// Timeout bounds how long the leader's request runs on for its
	// followers once the leader's own context has ended. Default:
	// DefaultTimeout.
	Timeout time.Duration
}

// Group coalesces calls by key. The nil *Group coalesces nothing: Do just
// runs fn. Its methods are safe for concurrent use.
type Group struct {
	maxBody atomic.Int64 // changed by SetConfig at any time
	timeout atomic.Int64 // a time.Duration

	mu    sync.Mutex
	calls map[string]*call

	led, shared, alone, abandoned atomic.Uint64
	released, unshareable         atomic.Uint64
}

// New returns a Group with the limits of c. It panics on a negative limit:
// configuration is validated before it gets here.
func New(c Config) *Group {
	g := &Group{calls: make(map[string]*call)}
	g.SetConfig(c)
	return g
}

// SetConfig changes the Group's limits for the calls that start from now on.
// It panics on a negative limit.
func (g *Group) SetConfig(c Config) {
	if c.MaxBody < 0 || c.Timeout < 0 {
		panic(fmt.Sprintf("coalesce: negative limit in %+v", c))
	}
	g.maxBody.Store(int64(c.MaxBody))
	g.timeout.Store(int64(cmp.Or(c.Timeout, DefaultTimeout)))
}

// call is one leader's request and the followers waiting for it. Fields
// marked (mu) are guarded by the Group's mutex; res and share are written
// once, before done is closed.
type call struct {
	key     string
	done    chan struct{}
	res     *Result
	share   bool
	cancel  context.CancelFunc
	timer   *time.Timer // ends an orphan's request after Timeout (mu)
	waiting int         // followers waiting now (mu)
	orphan  bool        // the leader's own context has ended (mu)
	over    bool        // the followers have been released: fn returned, or Release (mu)
	// committed: fn's request is at the backend and runs to its end (Commit)
	// (mu).
	committed bool
	// handed: fn returns before its request ends, and the request's own
	// end publishes the result (Hand) (mu).
	handed bool
	g      *Group
}

// callKey is the context key under which a leader's fn finds its call.
type callKey struct{}

// Release tells the followers of the call whose fn was given ctx not to wait
// for its result: they run their own fn at once, and callers arriving from now
// on lead a call of their own. fn calls it as soon as it knows its result
// will not be shared, for instance when it starts streaming a body larger than
// MaxBody to its own client: the followers then wait one backend trip, not the
// leader's client. The leader's context is no longer cancelled for want of
// followers. For a ctx that no leader's fn was given, Release does nothing.
func Release(ctx context.Context) {
	c, ok := ctx.Value(callKey{}).(*call)
	if !ok {
		return
	}
	if c.g.finish(c, nil, false) {
		c.g.released.Add(1)
	}
}

// Commit tells the Group that the request of the call whose fn was given ctx
// has reached the backend, which works it off whether or not anyone waits for
// the answer: its context is no longer cancelled when the leader's client
// leaves and no follower waits (nor after Config.Timeout once it has left),
// and the call stays open to followers until fn returns, so that callers who
// ask for the same key meanwhile share that work rather than add a request of
// their own. The request's deadline still bounds it. For a ctx that no
// leader's fn was given, or after Release, Commit does nothing.
func Commit(ctx context.Context) {
	c, ok := ctx.Value(callKey{}).(*call)
	if !ok {
		return
	}
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	if c.over {
		return
	}
	c.committed = true
	if c.timer != nil {
		// The leader left before the request reached the backend, and a
		// follower kept it going: it now runs to its end.
		c.timer.Stop()
	}
}

// Hand tells the Group that the committed request of the call whose fn was
// given ctx outlives fn: fn is about to return without a result, because
// its own caller stopped waiting (its budget ended), while the backend
// still works on the request. The followers keep waiting, and callers who
// ask for the key meanwhile join, until the returned finish is called with
// the request's result, which is then shared as Do would have shared it;
// Do returns fn's nil to the leader without ending the call. finish must be
// called once. For a ctx that no leader's fn was given, before Commit or
// after Release, Hand returns nil, and fn's return ends the call as always.
func Hand(ctx context.Context) (finish func(*Result)) {
	c, ok := ctx.Value(callKey{}).(*call)
	if !ok {
		return nil
	}
	c.g.mu.Lock()
	defer c.g.mu.Unlock()
	if c.over || !c.committed {
		return nil
	}
	c.handed = true
	return func(res *Result) {
		share := c.g.shareable(res)
		if c.g.finish(c, res, share) && !share {
			c.g.unshareable.Add(1)
		}
	}
}

// Do returns the result of fn for key, sharing one run of fn between the
// callers that ask for the same key at the same time.
//
// The first caller for a key leads: Do runs its fn, in the caller's goroutine,
// with a context that keeps ctx's values and deadline but not its
// cancellation. When ctx ends, that context is cancelled at once if no
// follower waits, and otherwise when the last follower stops waiting or
// Config.Timeout has passed, whichever comes first; once fn has called
// Commit, never for want of callers. fn's result is returned
// to the leader as it is, with Led; the leader's caller is therefore held
// until fn returns even when its own ctx has ended. fn returns nil when it
// has no answer to share: it failed, or answered its client itself (for
// instance by streaming a large body). What else it has to tell its own
// caller (how it failed) stays in the caller's fn, which is a closure of its
// own: the Group carries results, not verdicts.
//
// A caller that finds a leader running for key follows: it waits for the
// leader's fn to return, or for its own ctx to end (then Do returns nil and
// Abandoned, and the leader carries on). If the leader's result is
// shareable, the follower gets the same *Result with Shared. It is not
// shareable when fn returned nil, a refusal of the leader's caller
// (CallersOwn), a status of 500 and above (the backend's verdict on that
// moment, not on the request), a body over
// Config.MaxBody, or when fn panicked; then the follower runs its own fn
// with its own ctx and gets its result with Alone.
//
// A panic in fn is not recovered: it goes on up the leader's stack after the
// followers have been released to run their own fn.
func (g *Group) Do(ctx context.Context, key string, fn func(context.Context) *Result) (*Result, Outcome) {
	if g == nil {
		return fn(ctx), Led
	}
	g.mu.Lock()
	if c, ok := g.calls[key]; ok {
		c.waiting++
		g.mu.Unlock()
		return g.follow(ctx, c, fn)
	}
	c := &call{key: key, done: make(chan struct{}), g: g}
	g.calls[key] = c
	g.mu.Unlock()
	g.led.Add(1)

	// The deadline is a budget, which the followers share since they came
	// later; cancellation is one client hanging up, which they do not.
	var lctx context.Context
	var cancel context.CancelFunc
	if d, ok := ctx.Deadline(); ok {
		lctx, cancel = context.WithDeadline(context.WithoutCancel(ctx), d)
	} else {
		lctx, cancel = context.WithCancel(context.WithoutCancel(ctx))
	}
	c.cancel = cancel
	lctx = context.WithValue(lctx, callKey{}, c)
	stop := context.AfterFunc(ctx, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		if c.over {
			// Released: the request is the leader's alone, and nobody
			// else waits for it.
			cancel()
			return
		}
		c.orphan = true
		if c.committed {
			return // at the backend: it runs to its end
		}
		if c.waiting == 0 {
			g.drop(c)
			return
		}
		c.timer = time.AfterFunc(time.Duration(g.timeout.Load()), cancel)
	})
	returned := false
	defer func() {
		stop()
		// A handed call is finished by its request's own end (Hand); its
		// request's context keeps none of lctx's cancellation.
		if !returned && g.finish(c, nil, false) { // fn panicked or called runtime.Goexit
			g.unshareable.Add(1)
		}
		if c.timer != nil { // set under g.mu before finish set c.over
			c.timer.Stop()
		}
		cancel()
	}()
	res := fn(lctx)
	returned = true
	g.mu.Lock()
	handed := c.handed
	g.mu.Unlock()
	if handed {
		return res, Led
	}
	share := g.shareable(res)
	if g.finish(c, res, share) && !share {
		g.unshareable.Add(1)
	}
	return res, Led
}

// follow waits for c as a follower.
func (g *Group) follow(ctx context.Context, c *call, fn func(context.Context) *Result) (*Result, Outcome) {
	select {
	case <-c.done:
		if c.share {
			g.shared.Add(1)
			return c.res, Shared
		}
		g.alone.Add(1)
		return fn(ctx), Alone
	case <-ctx.Done():
		g.mu.Lock()
		c.waiting--
		if c.waiting == 0 && c.orphan && !c.over && !c.committed {
			g.drop(c)
		}
		g.mu.Unlock()
		g.abandoned.Add(1)
		return nil, Abandoned
	}
}

// drop cancels c's request, which nobody waits for any more, and takes it out
// of the map so that a caller arriving now leads a fresh request instead of
// joining one that is being cancelled. Under g.mu.
func (g *Group) drop(c *call) {
	if g.calls[c.key] == c {
		delete(g.calls, c.key)
	}
	c.cancel()
}

// finish publishes the leader's result and releases the followers, once:
// after Release, the result fn returns is the leader's alone. It reports
// whether this call was the one.
func (g *Group) finish(c *call, res *Result, share bool) bool {
	g.mu.Lock()
	if c.over {
		g.mu.Unlock()
		return false
	}
	c.over = true
	if g.calls[c.key] == c {
		delete(g.calls, c.key)
	}
	c.res, c.share = res, share
	if share {
		res.Followers = c.waiting
	}
	g.mu.Unlock()
	close(c.done)
	return true
}

// shareable reports whether res may go to callers other than the leader.
func (g *Group) shareable(res *Result) bool {
	// Never a part (206) or a "not modified" (304): an answer to what one
	// caller asked for, not to the request the followers share.
	return res != nil &&
		res.Status >= 200 && res.Status < 500 && !CallersOwn(res.Status) &&
		res.Status != http.StatusPartialContent && res.Status != http.StatusNotModified &&
		(g.maxBody.Load() == 0 || int64(len(res.Body)) <= g.maxBody.Load())
}

// CallersOwn reports whether an answer of status is a refusal made for
// the one caller whose request it answered, and never another's: a
// request for its credentials (401, 407), a refusal of it (403), of its
// rate (429), of its request's head (431), or of the loop its request
// made (508). Whoever made it (the gateway, a handler after it, a panel,
// the backend), it is not shared, cached, or a live stream's event.
func CallersOwn(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired,
		http.StatusTooManyRequests, http.StatusRequestHeaderFieldsTooLarge, http.StatusLoopDetected:
		return true
	}
	return false
}

// Stats is a snapshot of a Group's counters, for metrics.
type Stats struct {
	// InFlight is how many leaders' requests are running now that a
	// caller can still join, and Waiting how many followers wait for them.
	InFlight, Waiting int
	// Counters since New, by Outcome: Led counts leaders, Shared the
	// followers served by a leader, Alone the followers that ran their own
	// request, Abandoned the followers that gave up waiting.
	Led, Shared, Alone, Abandoned uint64
	// Counters of leaders whose answer was not shared, since New: Released
	// those that let their followers go before the answer was complete
	// (Release: an answer too large to hold), Unshareable those whose
	// finished answer could not be shared (an error, a refusal of its
	// caller or a 5xx, a body over MaxBody, a panic).
	Released, Unshareable uint64
}

// Stats returns the Group's counters. A nil Group reports zeros.
func (g *Group) Stats() Stats {
	if g == nil {
		return Stats{}
	}
	g.mu.Lock()
	n, waiting := len(g.calls), 0
	for _, c := range g.calls {
		waiting += c.waiting
	}
	g.mu.Unlock()
	return Stats{
		InFlight:    n,
		Waiting:     waiting,
		Led:         g.led.Load(),
		Shared:      g.shared.Load(),
		Alone:       g.alone.Load(),
		Abandoned:   g.abandoned.Load(),
		Released:    g.released.Load(),
		Unshareable: g.unshareable.Load(),
	}
}
