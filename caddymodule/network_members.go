package caddymodule

// This file is a network's member trips: the request for a member's
// /status, made on the network's own behalf, and what its answer says
// (networkState.build makes the document of them).

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/network"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
)

// memberTrips is what a network's member trips need of it: the network's
// name, its status endpoint, the handler's guard, the bound of an answer
// and the logger.
type memberTrips struct {
	cluster string
	// status is the handler's status endpoint: the members' answers are
	// fetched as its answers, cached for its times, and the documents are
	// kept for them too.
	status *endpoint
	// guard is the handler's: the documents are delivered through it, held
	// for their callers against their shares of its held bytes, and kept
	// against its held bytes while they last.
	guard *guard.Guard
	// declared says the handler declares its backend; else it is of the
	// form of 1.0, and what follows statusgate is the way to its backend.
	declared bool
	// bound is the largest document a caller gets (max_response, which an
	// answer a caller is sent whole never exceeds): past it, the largest
	// members are left out and named in meta.unreachable.
	bound  int
	logger *zap.Logger
}

// statusPath is what a member is asked for.
const statusPath = "/api/v1/status"

// memberRequest is the request for m's /status on the network's own
// behalf, and its ticket, under ctx (a build's): made of nothing of any
// caller's request, so that every build, plain or a stream's poll, on any
// site of the gateway, asks each member the same request under the same
// share key. It asks for /api/v1/status without a query, with no Host
// (the member's proxy sends its dial, or its header_up Host), for an
// unencoded JSON body the gateway can read, as a whole answer, the one
// every caller of the network shares. Its caller is the network ("network
// <cluster>"), in the admission class keyed says, with no cap of its own:
// the members' trips are never charged to one caller's per-client place,
// so that a caller that floods cannot make a member look unreachable to
// everyone. srv is the caller's server, next what follows statusgate (in
// the form of 1.0, the way to self; nil where nothing can).
func (n *memberTrips) memberRequest(ctx context.Context, srv *caddyhttp.Server, m networkMember, keyed bool, next caddyhttp.HandlerFunc) (*http.Request, *guard.Ticket) {
	who := guard.Caller{Keyed: keyed, Authenticated: true, Gateway: true,
		Holder: "network " + n.cluster, Held: hold.Share{Keyed: keyed}}
	if !m.own && !n.declared {
		// The form of 1.0: what follows statusgate is the way to the
		// handler's backend (a reverse_proxy), not to this member's, which
		// the member's own proxy reaches with nothing after it.
		next = nil
	}
	var after caddyhttp.Handler // nil: nothing follows the handler
	if next != nil {
		after = next
	}
	bg, mt, _ := gatewayRequest(ctx, m.guard, srv, n.status, statusPath, who, after)
	bg.Header.Set(networkHeader, n.cluster)
	return bg, mt
}

// gatewayRequest is a request the gateway makes on its own behalf through
// g (a network member's /status, a game server's figures for the metrics),
// for path as the endpoint ep, and its ticket: made of nothing of any
// caller's request, with no Host (g's proxy sends its dial, or its
// header_up Host), for an unencoded JSON body the gateway can read. who is
// the gateway in the admission class it asks in; srv the server its
// placeholders are read under; next what follows statusgate. The request
// lives until ctx ends or stop is called, whichever is first.
func gatewayRequest(ctx context.Context, g *guard.Guard, srv *caddyhttp.Server, ep *endpoint, path string, who guard.Caller, next caddyhttp.Handler) (*http.Request, *guard.Ticket, context.CancelFunc) {
	repl := caddy.NewReplacer()
	repl.Set(placeholderEndpoint, ep.nameValue)
	repl.Set(placeholderKey, noValue)
	repl.Set(placeholderClient, who.Holder)
	base := context.WithValue(context.WithValue(context.Background(), caddyhttp.ServerCtxKey, srv), caddy.ReplacerCtxKey, repl)
	r, _ := http.NewRequestWithContext(base, http.MethodGet, path, nil)
	r.Host, r.RequestURI = "", path
	t := g.Ticket(r, &ep.Station, who, path, nil, next)
	// ctx's cancellation, not its values: those are a caller's (its
	// connection, its site's address), which no share key may depend on.
	bctx, cancel := context.WithCancel(base)
	unhook := context.AfterFunc(ctx, cancel)
	bg := g.BackgroundRequest(bctx, r, t)
	return bg, t, func() { unhook(); cancel() }
}

// networkHeader marks a network's member requests, so that a member that
// leads back to a gateway's /network (its own through another site, or a
// rewrite) is stopped there (fetch) instead of asking its members again,
// and again.
const networkHeader = "Statusgate-Network"

// errNetworkLoop is why a request for a network that a network's member
// request led to is refused, and why that member is left out.
var errNetworkLoop = errors.New("a network's member request led to a network: a member must be a game server's /status, not a gateway's /network")

// memberAnswer is what one member answered: its status, or why it is left
// out.
type memberAnswer struct {
	status network.Status
	left   error // why the member is left out; nil: status is its answer
	// logAs is the status a member left out is logged under as a backend
	// failure; 0: not one (the member's guard was busy), or one logged
	// already (the same answer, read before).
	logAs int
	// share says the failure is the member's, to be shared for a while
	// (failureTime): not its guard being busy, nor the build's end.
	share bool
}

// ask fetches m's status with the request r that t describes.
func (n *memberTrips) ask(m networkMember, r *http.Request, t *guard.Ticket) (a memberAnswer) {
	rec := guard.NewCapture(n.bound)
	logger := n.logger.With(zap.String("network_member", m.id))
	v := guard.Background(logger, "fetching a network member's status", t.Station, func() guard.Verdict {
		return m.guard.Fetch(progress.New(rec, 0), r, t)
	})
	switch {
	case rec.Over && errors.Is(v.Cause, guard.ErrBrokeOff):
		// Streamed past max_response: the write that went over failed,
		// and the proxy gave up.
		a = memberAnswer{left: errMemberTooLarge, logAs: http.StatusBadGateway, share: true}
		return a
	case v.Refusal():
		// The member's guard has no room for the network now (its
		// queue, its per-client place for the network): left out of this
		// document, not a failure of the member's.
		a.left = cmp.Or(v.Cause, errMemberBusy)
		return a
	case v.Status != 0 || v.Cut:
		a.left = cmp.Or(v.Cause, guard.ErrBrokeOff)
		if v.Failed() {
			a.logAs = cmp.Or(v.Status, http.StatusBadGateway)
		}
		a.share = true
		return a
	case rec.Over:
		a.left = errMemberTooLarge
	case rec.Status == http.StatusLoopDetected:
		a.left = errNetworkLoop
	case rec.Status != http.StatusOK:
		a.left = fmt.Errorf("the member answered %d", rec.Status)
	default:
		read, fresh := m.read(rec.Body)
		a.status, a.left = read.status, read.err
		if !fresh {
			return a // a failure in it was logged when it was first read
		}
	}
	a.logAs, a.share = http.StatusBadGateway, a.left != nil
	return a
}

// errMemberBusy is why a member is left out when its guard had no room for
// the network's trip.
var errMemberBusy = errors.New("the member's guard has no room for the network's request now")

// errMemberTooLarge is why a member's status is left out when it is larger
// than max_response.
var errMemberTooLarge = errors.New("the member's status is larger than max_response")

// networkMember is one member server and its guard.
type networkMember struct {
	id    string
	guard *guard.Guard
	own   bool // the handler's own guard (self), which the handler leaves
	// last is the member's answer as last read (nil: none kept): the
	// builds that get the same bytes, from the member's micro-cache or a
	// shared trip, share its reading too.
	last *atomic.Pointer[memberRead]
	// failed is the member's last failure, shared by the builds until its
	// time, so that a member that hangs or fails costs one trip for that
	// time, not one for each class or each stream.
	failed *atomic.Pointer[memberFailure]
}

// newMember is the member id, fetched through g (own: the handler's).
func newMember(id string, g *guard.Guard, own bool) networkMember {
	return networkMember{id: id, guard: g, own: own, last: new(atomic.Pointer[memberRead]), failed: new(atomic.Pointer[memberFailure])}
}

// memberRead is a member's answer and what network.ParseStatus made of it.
type memberRead struct {
	body   []byte
	status network.Status
	err    error
}

// memberFailure is why a member was left out, until when.
type memberFailure struct {
	err   error
	until time.Time
}

// read is what body, m's answer, says: read once for every build that
// gets the same bytes; fresh says it was read now (and a failure in it is
// news to log).
func (m networkMember) read(body []byte) (r *memberRead, fresh bool) {
	if m.last != nil {
		if last := m.last.Load(); last != nil && bytes.Equal(last.body, body) {
			return last, false
		}
	}
	r = &memberRead{body: body}
	r.status, r.err = network.ParseStatus(body)
	if m.last != nil {
		m.last.Store(r)
	}
	return r, true
}
