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
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/hold"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/network"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
	"github.com/statusgate/statusgate/internal/apijson"
	"github.com/statusgate/statusgate/internal/ident"
)

// NetworkConfig is a network of game servers whose /api/v1/network the
// gateway answers itself (docs/network.md): the plugin's network document,
// built from each member's /api/v1/status instead of heartbeats in Redis.
// It needs the network endpoint enabled ("endpoints": {"network": true}).
type NetworkConfig struct {
	// Cluster is the network's name, the document's cluster (the plugin's
	// network.cluster-id): letters, digits, '_' and '-'. Required.
	Cluster string `json:"cluster"`

	// Servers are the member servers, at least one, in the order the
	// document lists them.
	Servers []NetworkServer `json:"servers"`

	// Self is the id of the member that is this handler's own backend: its
	// /status is fetched through this handler's guard and proxy, and it is
	// the document's thisServer. With a declared backend, that member must
	// declare the same upstreams. Default: none, and thisServer is "".
	Self string `json:"self,omitempty"`
}

// NetworkServer is one member server of a network.
type NetworkServer struct {
	// ID is the server's name in the document (its server) and in
	// meta.unreachable: letters, digits, '_' and '-', each once. Required.
	ID string `json:"id"`

	// ProxyRaw is the server's backend, as a handler's proxy declares one: the
	// JSON of Caddy's reverse_proxy handler without "handler", at least
	// {"upstreams": [{"dial": "10.0.0.3:8080"}]}. It names the member's
	// guard, so that a handler that declares the same backend (statusgate
	// 10.0.0.3:8080) shares the guard and its counts. A member is a fixed
	// server: no placeholder may pick it, and it may not be the gateway's
	// own listener. Absent: the server the statusgate app declares under
	// ID, with its own limits.
	ProxyRaw json.RawMessage `json:"proxy,omitempty"`

	// declared is the server the statusgate app declares under ID, when
	// Proxy was left out for it (Handler.adopt): the member is counted with
	// the server's own limits.
	declared *Server
}

// networkIDError says why id, the value of the option at path, is no name,
// or nil: the Caddyfile's rule and the JSON's.
func networkIDError(path, id string) error {
	if ident.Valid(id) {
		return nil
	}
	return fmt.Errorf("%s: '%s' is not a name of letters, digits, '_' and '-'", path, id)
}

// networkSwitchError says why a network config cannot be meant with these
// endpoint switches and backend options, or nil: the block is there and the
// network endpoint is off by default (a network that answers nothing), or
// the network endpoint has a cache or snapshot time of its own (its answer
// follows the members' /status).
func networkSwitchError(endpoints map[string]bool, b BackendConfig) error {
	if _, set := endpoints["network"]; !set {
		return errors.New("the network endpoint is off (its default), so the network would answer nothing: enable it (Caddyfile: enable network; JSON: \"endpoints\": {\"network\": true})")
	}
	for _, section := range []struct {
		name string
		m    map[string]caddy.Duration
	}{{"cache", b.Cache}, {"snapshot", b.Snapshot}} {
		if _, set := section.m["network"]; set {
			return fmt.Errorf("%s network: the gateway answers network from the members' /status, which is cached and polled for status's times: set %s status instead", section.name, section.name)
		}
	}
	return nil
}

// parse refuses a network config that is incomplete or cannot be meant,
// naming the option by its JSON path, and parses the members' backends
// (by server); own is the handler's declared backend (nil: the form of
// 1.0), which self must declare too; listen is what the handler's server
// listens on, which no other member may be. on says the network endpoint is
// enabled: a network whose endpoint the config switches off on purpose is
// checked, and not joined.
func (c *NetworkConfig) parse(endpoints map[string]bool, b BackendConfig, own *upstream.Backend, listen []string) (backends []*upstream.Backend, on bool, err error) {
	if err := networkSwitchError(endpoints, b); err != nil {
		return nil, false, fmt.Errorf("network: %v", err)
	}
	switch {
	case c.Cluster == "":
		return nil, false, errors.New("network.cluster: missing: name the network, as the plugin's network.cluster-id (Caddyfile: network <cluster-id> { ... })")
	case len(c.Servers) == 0:
		return nil, false, errors.New("network.servers: none: list the member servers, each with its id and proxy (Caddyfile: server <server-id> <upstream>...)")
	}
	if err := networkIDError("network.cluster", c.Cluster); err != nil {
		return nil, false, err
	}
	ids := map[string]int{}
	byServer := map[string]int{}
	for i, s := range c.Servers {
		path := fmt.Sprintf("network.servers[%d]", i)
		if s.ID == "" {
			return nil, false, fmt.Errorf("%s.id: missing: give each server the name the document shows", path)
		}
		if err := networkIDError(path+".id", s.ID); err != nil {
			return nil, false, err
		}
		if j, dup := ids[s.ID]; dup {
			return nil, false, fmt.Errorf("%s.id: '%s' is network.servers[%d]'s id too: each server once", path, s.ID, j)
		}
		ids[s.ID] = i
		be, err := upstream.Parse(path+" '"+s.ID+"'.proxy", s.ProxyRaw)
		if err != nil {
			return nil, false, err
		}
		if why := memberRefusal(be); why != "" {
			return nil, false, fmt.Errorf("%s '%s'.proxy: %s", path, s.ID, why)
		}
		if j, dup := byServer[be.Server()]; dup {
			return nil, false, fmt.Errorf("%s '%s'.proxy: %s is the server network.servers[%d] '%s' declares as %s: one server under two ids would count its players twice", path, s.ID, be, j, c.Servers[j].ID, backends[j])
		}
		byServer[be.Server()] = i
		if s.ID != c.Self {
			if dial, l, ok := ownListener(be, listen); ok {
				return nil, false, fmt.Errorf("%s '%s'.proxy: %s is this gateway's own listener, %s: a member is a game server, and a gateway that asks itself for a member's status asks itself again", path, s.ID, dial, l)
			}
		}
		backends = append(backends, be)
	}
	if c.Self != "" {
		i, ok := ids[c.Self]
		switch {
		case !ok:
			return nil, false, fmt.Errorf("network.self: '%s' is no server of the network (its servers: %s)", c.Self, strings.Join(slices.Sorted(maps.Keys(ids)), ", "))
		case own != nil && !backends[i].Is(own):
			return nil, false, fmt.Errorf("network.self: '%s' is this handler's own backend, but network.servers[%d] '%s' %s", c.Self, i, c.Self, selfMismatch(backends[i], own))
		}
	}
	return backends, endpoints["network"], nil
}

// memberRefusal says why be cannot be a network member's backend, or "":
// a member is a fixed server, and a placeholder in what picks the server
// (its dials, its Host, a rewrite) would let each caller pick the address
// the gateway asks, on the network's behalf.
func memberRefusal(be *upstream.Backend) string {
	if names := be.Picking(); len(names) > 0 {
		return fmt.Sprintf("{%s} picks the server for each request, so a caller would pick what the gateway asks: a member is a fixed server; name its address", strings.Join(names, "}, {"))
	}
	return ""
}

// selfMismatch says how self, the member a network's self names, is not
// own, the handler's backend, for the Caddyfile's message and the JSON's:
// other upstreams, or the same with a block that picks another server.
func selfMismatch(self, own *upstream.Backend) string {
	if self.SameUpstreams(own) {
		return fmt.Sprintf("declares this statusgate's upstreams, %s, with a block that picks another server than the statusgate's proxy block (a Host, a rewrite, TLS: one address for two servers told apart by Host is two backends): give it no block, or the statusgate's proxy block", self)
	}
	return fmt.Sprintf("declares %s, and this statusgate's backend is %s: give it the same upstreams", self, own)
}

// ownListener finds a dial of the member be that reaches one of listen, the
// addresses the gateway's server listens on (caddyhttp.Server.Listen):
// the same address, or the same port on this machine where the gateway
// listens on every address. It returns the dial and the listener.
func ownListener(be *upstream.Backend, listen []string) (dial, listener string, found bool) {
	for _, l := range listen {
		na, err := caddy.ParseNetworkAddress(l)
		if err != nil || na.IsUnixNetwork() {
			continue
		}
		every := na.Host == "" || isUnspecified(na.Host)
		for port := na.StartPort; ; port++ {
			own := upstream.Address(net.JoinHostPort(na.Host, strconv.FormatUint(uint64(port), 10)))
			for _, d := range be.Dials() {
				if d == own || every && local(d, port) {
					return d, l, true
				}
			}
			if port >= na.EndPort {
				break
			}
		}
	}
	return "", "", false
}

// isUnspecified reports whether host is an address that listens on every
// address of the machine (0.0.0.0, ::).
func isUnspecified(host string) bool {
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsUnspecified()
}

// local reports whether d, an address as upstream.Address reads it,
// reaches this machine on port: loopback, an unspecified address, or one
// of the machine's own.
func local(d string, port uint) bool {
	_, hostport, _ := strings.Cut(d, "/")
	host, p, err := net.SplitHostPort(hostport)
	if err != nil || p != strconv.FormatUint(uint64(port), 10) {
		return false
	}
	if host == "loopback" || isUnspecified(host) {
		return true
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	addrs, _ := net.InterfaceAddrs()
	for _, a := range addrs {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil && pfx.Addr().Unmap() == ip {
			return true
		}
	}
	return false
}

// networkState is a handler's network: its members, each fetched through
// the guard its declaration names, and the documents made of what they
// answer, one for each class of caller, shared by every caller of the class.
type networkState struct {
	cluster string
	self    string // the member that is the handler's own backend, or ""
	members []networkMember
	// status is the handler's status endpoint: the members' answers are
	// fetched as its answers, cached for its times, and the documents are
	// kept for them too. ep is the network endpoint, whose field lists the
	// documents go through.
	status, ep *endpoint
	// guard is the handler's: the documents are delivered through it, held
	// for their callers against their shares of its held bytes, and kept
	// against its held bytes while they last.
	guard *guard
	// bound is the largest document a caller gets (max_response, which an
	// answer a caller is sent whole never exceeds): past it, the largest
	// members are left out and named in meta.unreachable.
	bound int
	// builds coalesces the making of the documents, by class: the gateway's
	// own work, like a cache refresh, which however many callers ask does
	// once; always on, whatever the guard's coalesce says of backend trips.
	builds *coalesce.Group
	// docs are the documents made, by class (docClass), until their time.
	docs [docClasses]atomic.Pointer[networkDoc]
	// rebuilding says a document's background rebuild is under way, by class.
	rebuilding [docClasses]atomic.Bool
	// gone says the handler is cleaned up: no document is kept any more.
	gone atomic.Bool
	// name names this handler's network for the builds: the builds of one
	// handler never meet another's.
	name   string
	logger *zap.Logger
}

// networkMember is one member server and its guard.
type networkMember struct {
	id    string
	guard *guard
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
func newMember(id string, g *guard, own bool) networkMember {
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

// joinNetwork sets up the network c, whose members' backends
// NetworkConfig.parse read (backends, by server): each member joins the guard its backend names with
// the limits l (the usual agreement rule applies), but self, whose guard is
// own, the handler's. bc is the handler's backend options, t its endpoint
// table, policy its field lists' fingerprint; each member's guard is
// exported in m. On an error, the network returned holds the guards joined
// so far, for leaveGuards.
func joinNetwork(app *App, ctx caddy.Context, c *NetworkConfig, backends []*upstream.Backend, own *guard,
	bc BackendConfig, l guardLimits, t *endpointTable, policy string, m *metrics.Metrics, logger *zap.Logger) (*networkState, error) {
	n := &networkState{
		cluster: c.Cluster,
		self:    c.Self,
		status:  t.byName["status"],
		ep:      t.byName["network"],
		guard:   own,
		bound:   int(l.MaxResponse),
		builds:  coalesce.New(coalesce.Config{MaxBody: int(l.MaxResponse)}),
		name:    "network " + c.Cluster + " " + rand.Text(),
		logger:  logger,
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
		where := fmt.Sprintf("server %s (%s) of network %s in %s", s.ID, backends[i], c.Cluster, handlerAt(ctx, own.backend))
		ml := l
		if s.declared != nil {
			// A server declared once is counted with its own limits,
			// whichever handler's network lists it.
			where = fmt.Sprintf("server %s (%s, declared once) of network %s in %s", s.ID, backends[i], c.Cluster, handlerAt(ctx, own.backend))
			var err error
			if ml, _, err = resolveGuard(withServer(mc, s.declared)); err != nil {
				return n, fmt.Errorf("network.servers[%d] '%s': %w", i, s.ID, err)
			}
		}
		g, err := joinGuard(app, ctx, mc, ml, backends[i], policy, logger, where)
		if err != nil {
			return n, fmt.Errorf("network.servers[%d] '%s': %w", i, s.ID, err)
		}
		n.members = append(n.members, newMember(s.ID, g, false))
		m.ExportGuard(g.units("", l))
	}
	return n, nil
}

// leaveGuards gives the members' guards back to the pool, and the
// documents' held bytes back to the handler's guard (nil: no network).
func (n *networkState) leaveGuards() {
	if n == nil {
		return
	}
	n.gone.Store(true)
	for i := range n.docs {
		n.keep(i, nil)
	}
	for _, m := range n.members {
		if !m.own {
			m.guard.leave()
		}
	}
}

// answers reports whether the network answers requests to ep: the network
// endpoint, while the handler has a network (nil: none).
func (n *networkState) answers(ep *endpoint) bool {
	return n != nil && ep.name == "network"
}

// A document class is what a document's bytes and its making depend on
// besides the members' answers: whether it goes through the field layer
// (bit 0), and whether its callers' key counts (bit 1), which is the
// admission class of its member trips. The field lists are the handler's.
const docClasses = 4

// docClass is the class of the documents who gets.
func docClass(who caller) int {
	c := 0
	if who.filtered() {
		c |= 1
	}
	if who.keyed {
		c |= 2
	}
	return c
}

// networkDoc is a document kept for its class's callers until expires, and
// served while rebuilt until gone; charged is what it takes of the
// handler's held bytes, in share's pool, while it is kept.
type networkDoc struct {
	res           *coalesce.Result
	expires, gone time.Time
	charged       int64
	share         hold.Share
}

// fetch answers the request r that t describes with the network document
// of the caller's class: the one kept, or the one being made for the class
// (coalesced: one build however many callers ask), or one the caller's
// request makes, leading the build. Every caller of the class gets the same
// bytes, lent to its share of the held bytes like a cached answer. A build
// asks every member for its /status at once, on the network's own behalf,
// not the caller's; a member that fails, hangs past its budget or is over a
// limit is left out and named in meta.unreachable, never the caller's
// refusal. The caller's own limits are its share of the held bytes and, if
// it leads a build, its per-client place or key cap for that time: its 429.
func (n *networkState) fetch(pw *progress.Writer, r *http.Request, t *ticket) verdict {
	who := t.who
	if r.Header.Get(networkHeader) != "" {
		// Refused before anything is asked: 508, which the network that
		// sent it reads as its member's failure.
		return verdict{outcome: metrics.BadRequest, status: http.StatusLoopDetected, cause: errNetworkLoop}
	}
	if err := n.guard.held.Check(who.holder, who.held); err != nil {
		return heldRefusal(err)
	}
	class := docClass(who)
	if d := n.docs[class].Load(); d != nil {
		if now := time.Now(); now.Before(d.gone) {
			if !now.Before(d.expires) {
				n.rebuild(r, t, class)
			}
			return n.guard.deliver(pw, who, d.res, true, true, metrics.Cached)
		}
	}
	var v verdict // of the caller's own lead
	res, how := n.builds.Do(r.Context(), n.shareKey(who)+" answer", func(ctx context.Context) *coalesce.Result {
		// The caller leads: its request counts among its open requests
		// while the document is made. A refusal is its own (a follower
		// then leads in its place, each joining the one build).
		give, refused := n.guard.place(who)
		if refused.status != 0 {
			v = refused
			return nil
		}
		defer give()
		res, _ := n.builds.Do(ctx, n.shareKey(who)+" build", func(ctx context.Context) *coalesce.Result {
			return n.build(ctx, r, t, class)
		})
		switch {
		case res != nil:
		case ctx.Err() != nil:
			v = contextRefusal(ctx.Err())
		default:
			v = verdict{outcome: metrics.BackendError, status: http.StatusInternalServerError}
		}
		return res
	})
	switch {
	case how == coalesce.Abandoned:
		return contextRefusal(r.Context().Err())
	case res == nil:
		return v
	}
	outcome := metrics.Coalesced
	if how != coalesce.Shared {
		outcome = metrics.Served
		if who.filtered() {
			outcome = metrics.Filtered
		}
	}
	return n.guard.deliver(pw, who, res, true, true, outcome)
}

// shareKey names the answers of the network to who for the live streams'
// topics: the class's document, the same on every site and whatever the
// client's Host.
func (n *networkState) shareKey(who caller) string {
	return n.name + " class " + strconv.Itoa(docClass(who))
}

// rebuild makes the document of the class anew in the background, unless
// that is under way: its callers meanwhile get the one kept, as a stale
// cache entry is served while it is refreshed.
func (n *networkState) rebuild(r *http.Request, t *ticket, class int) {
	if !n.rebuilding[class].CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer n.rebuilding[class].Store(false)
		n.builds.Do(context.WithoutCancel(r.Context()), n.shareKey(t.who)+" build", func(ctx context.Context) *coalesce.Result {
			return n.build(ctx, r, t, class)
		})
	}()
}

// build makes the document of the class for the request r that t
// describes (its caller is of the class), and keeps it for the status's
// time; nil only on the gateway's own error. The members are asked on the
// network's own behalf (memberRequest), within each one's budget; a member
// whose failure is still shared is not asked again.
func (n *networkState) build(ctx context.Context, r *http.Request, t *ticket, class int) *coalesce.Result {
	srv, _ := r.Context().Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	answers := make([]memberAnswer, len(n.members))
	var wg sync.WaitGroup
	now := time.Now()
	for i, m := range n.members {
		if f := m.failed.Load(); f != nil && now.Before(f.until) {
			answers[i] = memberAnswer{left: f.err} // logged when it failed
			continue
		}
		mr, mt := n.memberRequest(ctx, srv, m, t.who.keyed, t.next)
		wg.Go(func() { answers[i] = n.ask(m, mr, mt) })
	}
	wg.Wait()
	if ctx.Err() != nil {
		return nil // every caller left: what the members said is nobody's
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
			logFailure(n.logger.With(zap.String("network_member", m.id)), a.logAs, n.status, a.left)
		}
		if a.share && ctx.Err() == nil {
			m.failed.Store(&memberFailure{err: a.left, until: now.Add(n.failureTime())})
		}
		doc.Unreachable = append(doc.Unreachable, m.id)
	}
	body, err := n.render(&doc, t.who, order)
	if err != nil {
		// The gateway rendered this body itself; failing here is a bug.
		n.logger.Error("filtering the network document", zap.Error(err))
		return nil
	}
	hdr := http.Header{}
	apijson.SetHeaders(hdr)
	setCORS(hdr)
	res := &coalesce.Result{Status: http.StatusOK, Header: hdr, Body: body}
	n.store(class, t.who, res)
	return res
}

// render is the document's answer for who, within the bound: while it is
// larger, the member whose part is largest is left out, named in
// meta.unreachable (in the block's order, by order) and logged, so that a
// network too large for its callers still answers with the others.
func (n *networkState) render(doc *network.Document, who caller, order map[string]int) ([]byte, error) {
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
	return min(max(n.status.cacheTTL, time.Second), staleGrace)
}

// store keeps res, the document of the class, for its callers: for the
// status's times, as its answer would be (cacheTime), charged to the
// handler's held bytes in the pool of the class while it is kept; a
// document that finds no room is not kept. Under a status without a cache
// time, or a guard without a micro-cache (cache_size off), nothing is
// kept, and each build is shared only by the callers that came while it
// ran. It is kept apart from the micro-cache, whose entries are at most an
// eighth of cache_size: a network's document is one per class, bounded by
// max_response, and a large one must not cost its members a trip per caller.
func (n *networkState) store(class int, who caller, res *coalesce.Result) {
	now := time.Now()
	ttl := cacheTime(n.status, res.Body, now)
	if n.status.cacheTTL <= 0 || n.guard.caching() == nil || ttl <= 0 {
		n.keep(class, nil)
		return
	}
	d := &networkDoc{res: res, expires: now.Add(ttl), gone: now.Add(ttl + staleGrace), share: hold.Share{Keyed: who.keyed}}
	d.charged = int64(len(res.Body))
	if err := n.guard.held.Take(d.share, d.charged); err != nil {
		n.keep(class, nil)
		return
	}
	n.keep(class, d)
}

// keep puts d (nil: none) in the class's place, giving back the held bytes
// of the document it replaces. Once the handler is gone (leaveGuards), a
// build that ends after it keeps nothing: the guard, and its held bytes,
// outlive the handler.
func (n *networkState) keep(class int, d *networkDoc) {
	if old := n.docs[class].Swap(d); old != nil && old.charged > 0 {
		n.guard.held.Give(old.share, old.charged)
	}
	if d != nil && n.gone.Load() {
		n.keep(class, nil)
	}
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
// the form of 1.0, the way to self).
func (n *networkState) memberRequest(ctx context.Context, srv *caddyhttp.Server, m networkMember, keyed bool, next caddyhttp.HandlerFunc) (*http.Request, *ticket) {
	who := caller{key: noKey, name: noValue, keyed: keyed, authenticated: true,
		holder: "network " + n.cluster, held: hold.Share{Keyed: keyed}}
	repl := caddy.NewReplacer()
	repl.Set(placeholderEndpoint, n.status.nameValue)
	repl.Set(placeholderKey, noValue)
	repl.Set(placeholderClient, who.holder)
	base := context.WithValue(context.WithValue(context.Background(), caddyhttp.ServerCtxKey, srv), caddy.ReplacerCtxKey, repl)
	mr, _ := http.NewRequestWithContext(base, http.MethodGet, statusPath, nil)
	mr.Host, mr.RequestURI = "", statusPath
	if !m.own && n.guard.backend == nil {
		// The form of 1.0: what follows statusgate is the way to the
		// handler's backend (a reverse_proxy), not to this member's.
		next = passOn.ServeHTTP
	}
	mt := m.guard.ticket(mr, n.status, who, statusPath, nil, caddyhttp.HandlerFunc(next))
	// The build's cancellation, not its values: those are the leading
	// caller's (its connection, its site's address), which no member's
	// share key may depend on.
	bctx, cancel := context.WithCancel(base)
	context.AfterFunc(ctx, cancel)
	bg := backgroundRequest(bctx, mr, mt)
	setEventAccept(bg.Header) // JSON the gateway can read, unencoded
	bg.Header.Set(networkHeader, n.cluster)
	return bg, mt
}

// networkHeader marks a network's member requests, so that a member that
// leads back to a gateway's /network (its own through another site, or a
// rewrite) is stopped there (fetch) instead of asking its members again,
// and again.
const networkHeader = "Statusgate-Network"

// errNetworkLoop is why a request for a network that a network's member
// request led to is refused, and why that member is left out.
var errNetworkLoop = errors.New("a network's member request led to a network: a member must be a game server's /status, not a gateway's /network")

// passOn is what follows statusgate for a member's trip in the form of
// 1.0: nothing, so that the trip goes to the member's own proxy.
var passOn = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

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
func (n *networkState) ask(m networkMember, r *http.Request, t *ticket) (a memberAnswer) {
	rec := &capture{header: http.Header{}, limit: n.bound}
	defer func() {
		// An answer that broke off ends in http.ErrAbortHandler, which
		// net/http would have caught for a caller; here nobody would.
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				n.logger.Error("fetching a network member's status failed", zap.String("network_member", m.id), zap.Any("panic", p))
			}
			a = memberAnswer{left: errBrokeOff, logAs: http.StatusBadGateway, share: true}
			if rec.over {
				// Streamed past max_response: the write that went over
				// failed, and the proxy gave up.
				a.left = errMemberTooLarge
			}
		}
	}()
	v := m.guard.fetch(progress.New(rec, 0), r, t)
	switch {
	case v.status == http.StatusTooManyRequests || v.status == http.StatusServiceUnavailable && !v.failed():
		// The member's guard has no room for the network now (its
		// queue, its per-client place for the network): left out of this
		// document, not a failure of the member's.
		a.left = cmp.Or(v.cause, errMemberBusy)
		return a
	case v.status != 0 || v.cut:
		a.left = cmp.Or(v.cause, errBrokeOff)
		if v.failed() {
			a.logAs = cmp.Or(v.status, http.StatusBadGateway)
		}
		a.share = true
		return a
	case rec.over:
		a.left = errMemberTooLarge
	case rec.status == http.StatusLoopDetected:
		a.left = errNetworkLoop
	case rec.status != http.StatusOK:
		a.left = fmt.Errorf("the member answered %d", rec.status)
	default:
		read, fresh := m.read(rec.body)
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

// errOverLimit fails a write past a capture's limit.
var errOverLimit = errors.New("the answer is larger than max_response")

// capture is the client of a fetch whose answer the gateway keeps (a
// network member's status, a live topic's answer): it keeps the status and
// up to limit bytes of the answer; a write past limit fails, so that the
// trip ends there.
type capture struct {
	header http.Header
	status int
	body   []byte
	limit  int
	over   bool // the answer was longer than limit
}

func (c *capture) Header() http.Header { return c.header }

func (c *capture) WriteHeader(status int) {
	if c.status == 0 && status >= http.StatusOK {
		c.status = status
	}
}

func (c *capture) Write(p []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	if len(c.body)+len(p) > c.limit {
		c.over = true
		return 0, errOverLimit
	}
	c.body = append(c.body, p...)
	return len(p), nil
}
