package caddymodule

// This file is a network of game servers (network <cluster-id> { ... }):
// the gateway answers /api/v1/network itself, in the plugin's shape, from
// what each member server answers to /api/v1/status (internal/network),
// fetched through the member's own guard on the network's own behalf. The
// document is the gateway's own work, made once per snapshot for each class
// of caller and shared, so that every caller of the network, plain or
// streamed, on any site, costs each member what one caller of its /status
// does, and the gateway what one caller of the network does; a member that
// fails is left out of it, never the caller's refusal.

import (
	"cmp"
	"context"
	"crypto/rand"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/cors"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/network"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
	"github.com/statusgate/statusgate/internal/apijson"
)

// networkState is a handler's network: its members, each fetched through
// the guard its declaration names, and the documents made of what they
// answer, one for each class of caller, shared by every caller of the class.
type networkState struct {
	// memberTrips are the network's name, its status endpoint, the
	// handler's guard, its bound and logger: what the members' trips need.
	memberTrips
	self    string // the member that is the handler's own backend, or ""
	members []networkMember
	// ep is the network endpoint, whose field lists the documents go
	// through.
	ep *endpoint
	// name names this handler's network for the documents its guard
	// keeps: the documents of one network never meet another's.
	name string
}

// joinNetwork sets up the network c, whose members' backends
// NetworkConfig.parse read (backends, by server): each member joins the guard its backend names with
// the limits l (the usual agreement rule applies), but self, whose guard is
// own, the handler's, in front of backend (nil: none declared). bc is the
// handler's backend options, t its endpoint table, policy its field lists'
// fingerprint; each member's guard is exported in m. On an error, the network returned holds the guards joined
// so far, for leaveGuards.
func joinNetwork(app *App, ctx caddy.Context, c *NetworkConfig, backends []*upstream.Backend, own *guard.Guard, backend *upstream.Backend,
	bc BackendConfig, l guard.Limits, t *endpointTable, policy string, m *metrics.Metrics, logger *zap.Logger) (*networkState, error) {
	n := &networkState{
		memberTrips: memberTrips{
			cluster:  c.Cluster,
			status:   t.byName["status"],
			guard:    own,
			declared: backend != nil,
			bound:    int(l.MaxResponse),
			logger:   logger,
		},
		self: c.Self,
		ep:   t.byName["network"],
		name: "network " + c.Cluster + " " + rand.Text(),
	}
	// A member's guard is named by its backend alone: a guard <name> of
	// this handler's names this handler's backend, not the members'.
	mc := bc
	mc.Guard = ""
	for i, s := range c.Servers {
		if s.ID == c.Self {
			n.members = append(n.members, newMember(s.ID, own, true))
			continue
		}
		if err := backends[i].Provision(ctx); err != nil {
			return n, err
		}
		where := fmt.Sprintf("server %s (%s) of network %s in %s", s.ID, backends[i], c.Cluster, handlerAt(ctx, backend))
		ml, sc := l, mc
		if s.declared != nil {
			// A server declared once is counted with its own limits, and
			// at its own guard (its guard <name> too), whichever handler's
			// network lists it: the guard its handlers join.
			where = fmt.Sprintf("server %s (%s, declared once) of network %s in %s", s.ID, backends[i], c.Cluster, handlerAt(ctx, backend))
			sc = withServer(mc, s.declared)
			var err error
			if ml, _, err = resolveGuard(sc); err != nil {
				return n, fmt.Errorf("network.servers[%d] '%s': %w", i, s.ID, err)
			}
		}
		g, err := joinGuard(app, ctx, sc, ml, backends[i], policy, logger, where)
		if err != nil {
			return n, fmt.Errorf("network.servers[%d] '%s': %w", i, s.ID, err)
		}
		n.members = append(n.members, newMember(s.ID, g, false))
		m.ExportGuard(g.Units(cmp.Or(sc.Guard, s.ID), ml)) // named by its guard's name, or its id
	}
	return n, nil
}

// leaveGuards gives the members' guards back to the pool (nil: no
// network); the handler's guard gives the documents' held bytes back when
// it leaves.
func (n *networkState) leaveGuards() {
	if n == nil {
		return
	}
	for _, m := range n.members {
		if !m.own {
			m.guard.Leave()
		}
	}
}

// answers reports whether the network answers requests to ep: the network
// endpoint, while the handler has a network (nil: none).
func (n *networkState) answers(ep *endpoint) bool {
	return n != nil && ep.Name == "network"
}

// docClass is the class of the documents who gets: what a document's bytes
// and its making depend on besides the members' answers, whether it goes
// through the field layer (bit 0), and whether its callers' key counts
// (bit 1), which is the admission class of its member trips. The field
// lists are the handler's.
func docClass(who guard.Caller) int {
	c := 0
	if who.Filtered() {
		c |= 1
	}
	if who.Keyed {
		c |= 2
	}
	return c
}

// fetch answers the request r that t describes with the network document
// of the caller's class, an answer of the gateway's own that the handler's
// guard keeps for the status's times and coalesces (guard.Guard.Own): every
// caller of the class gets the same bytes. A build asks every member for
// its /status at once, on the network's own behalf, not the caller's; a
// member that fails, hangs past its budget or is over a limit is left out
// and named in meta.unreachable, never the caller's refusal.
func (n *networkState) fetch(pw *progress.Writer, r *http.Request, t *guard.Ticket) guard.Verdict {
	if r.Header.Get(networkHeader) != "" {
		// Refused before anything is asked: 508, which the network that
		// sent it reads as its member's failure.
		return guard.Verdict{Outcome: metrics.BadRequest, Status: http.StatusLoopDetected, Cause: errNetworkLoop}
	}
	dt := *t
	dt.Share = n.shareKey(t.Caller) // the class's document, whoever made the ticket
	return n.guard.Own(pw, r, &dt, func(ctx context.Context) (*coalesce.Result, time.Duration) {
		return n.build(ctx, r, t)
	})
}

// shareKey names the answers of the network to who, for the documents its
// guard keeps and the live streams' topics: the class's document, the same
// on every site and whatever the client's Host.
func (n *networkState) shareKey(who guard.Caller) string {
	return n.name + " class " + strconv.Itoa(docClass(who))
}

// build makes the document of the class of the request r that t
// describes, and says how long it may be kept: the status's times, as its
// answer would be (guard.CacheTime), or 0 under a status without a cache
// time; nil only on the gateway's own error. The members are asked on the
// network's own behalf (memberRequest), within each one's budget; a member
// whose failure is still shared is not asked again.
func (n *networkState) build(ctx context.Context, r *http.Request, t *guard.Ticket) (*coalesce.Result, time.Duration) {
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	answers := make([]memberAnswer, len(n.members))
	var wg sync.WaitGroup
	now := time.Now()
	for i, m := range n.members {
		if f := m.failed.Load(); f != nil && now.Before(f.until) {
			answers[i] = memberAnswer{left: f.err} // logged when it failed
			continue
		}
		mr, mt := n.memberRequest(ctx, srv, m, t.Caller.Keyed, t.Next)
		wg.Go(func() { answers[i] = n.ask(m, mr, mt) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil, 0 // every caller left: what the members said is nobody's
	}

	doc := network.Document{Cluster: n.cluster, ThisServer: n.self}
	order := map[string]int{}
	now = time.Now()
	for i, a := range answers {
		m := n.members[i]
		order[m.id] = i
		if a.left == nil {
			a.left = a.status.Current(now)
			a.logAs, a.share = http.StatusBadGateway, true
		}
		if a.left == nil {
			doc.Members = append(doc.Members, network.Member{ID: m.id, Status: a.status})
			continue
		}
		if a.logAs != 0 {
			logFailure(n.logger.With(zap.String("network_member", m.id)), a.logAs, n.status.Name, a.left)
		}
		if a.share && ctx.Err() == nil {
			m.failed.Store(&memberFailure{err: a.left, until: now.Add(n.failureTime())})
		}
		doc.Unreachable = append(doc.Unreachable, m.id)
	}
	body, err := n.render(&doc, t.Caller, order)
	if err != nil {
		// The gateway rendered this body itself; failing here is a bug.
		n.logger.Error("filtering the network document", zap.Error(err))
		return nil, 0
	}
	hdr := http.Header{}
	apijson.SetHeaders(hdr)
	cors.Set(hdr)
	res := &coalesce.Result{Status: http.StatusOK, Header: hdr, Body: body}
	if n.status.CacheTTL <= 0 {
		return res, 0
	}
	return res, guard.CacheTime(&n.status.Station, body, time.Now())
}

// render is the document's answer for who, within the bound: while it is
// larger, the member whose part is largest is left out, named in
// meta.unreachable (in the block's order, by order) and logged, so that a
// network too large for its callers still answers with the others.
func (n *networkState) render(doc *network.Document, who guard.Caller, order map[string]int) ([]byte, error) {
	for {
		body, err := ownAnswer(doc.AppendData(nil), doc.AppendMeta(nil), who, n.ep)
		if err != nil || len(body) <= n.bound || len(doc.Members) == 0 {
			return body, err
		}
		i := doc.Largest()
		id := doc.Members[i].ID
		n.logger.Warn("network document larger than max_response: its largest member is left out",
			zap.String("network_member", id), zap.Int("document_bytes", len(body)), zap.Int("max_response", n.bound))
		doc.Members = slices.Delete(doc.Members, i, i+1)
		doc.Unreachable = append(doc.Unreachable, id)
		slices.SortFunc(doc.Unreachable, func(a, b string) int { return cmp.Compare(order[a], order[b]) })
	}
}

// failureTime is how long a member's failure is shared: the status's time
// to live, so that a member that fails costs a trip per that time however
// many builds and streams ask; at least a second, and at most the stale
// grace (the default budget), so that a member that is back is back soon.
func (n *networkState) failureTime() time.Duration {
	return min(max(n.status.CacheTTL, time.Second), guard.StaleGrace)
}
