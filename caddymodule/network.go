package caddymodule

// This file is a network of game servers (network <cluster-id> { ... }):
// the gateway answers /api/v1/network itself, in the plugin's shape, from
// what each member server answers to /api/v1/status (internal/network),
// fetched through the member's own guard, so that every caller of the
// network, plain or streamed, costs each member what one caller of its
// /status does.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
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

	// Proxy is the server's backend, as a handler's proxy declares one: the
	// JSON of Caddy's reverse_proxy handler without "handler", at least
	// {"upstreams": [{"dial": "10.0.0.3:8080"}]}. It names the member's
	// guard, so that a handler that declares the same backend (statusgate
	// 10.0.0.3:8080) shares the guard, its micro-cache and its trips.
	// Absent: the server the statusgate app declares under ID, with its
	// own limits.
	Proxy json.RawMessage `json:"proxy,omitempty"`

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
// 1.0), which self must declare too. on says the network endpoint is
// enabled: a network whose endpoint the config switches off on purpose is
// checked, and not joined.
func (c *NetworkConfig) parse(endpoints map[string]bool, b BackendConfig, own *upstream.Backend) (backends []*upstream.Backend, on bool, err error) {
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
	byBackend := map[string]int{}
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
		be, err := upstream.Parse(path+" '"+s.ID+"'.proxy", s.Proxy)
		if err != nil {
			return nil, false, err
		}
		if j, dup := byBackend[be.ID()]; dup {
			return nil, false, fmt.Errorf("%s '%s'.proxy: the same backend as network.servers[%d] '%s': one server under two ids would count its players twice", path, s.ID, j, c.Servers[j].ID)
		}
		byBackend[be.ID()] = i
		backends = append(backends, be)
	}
	if c.Self != "" {
		i, ok := ids[c.Self]
		switch {
		case !ok:
			return nil, false, fmt.Errorf("network.self: '%s' is no server of the network (its servers: %s)", c.Self, strings.Join(slices.Sorted(maps.Keys(ids)), ", "))
		case own != nil && !backends[i].Is(own):
			return nil, false, fmt.Errorf("network.self: '%s' is this handler's own backend, %s, but network.servers[%d] '%s' declares %s (its proxy must be the handler's, or its upstreams alone): declare it with the handler's upstreams", c.Self, own, i, c.Self, backends[i])
		}
	}
	return backends, endpoints["network"], nil
}

// networkState is a handler's network: its members, each fetched through
// the guard its declaration names, and how the document is made of what
// they answer.
type networkState struct {
	cluster string
	self    string // the member that is the handler's own backend, or ""
	members []networkMember
	// status is the handler's status endpoint: the members' answers are
	// fetched as its answers, cached for its times.
	status *endpoint
	// guard is the handler's: the document is held for its caller
	// against the caller's share of its held bytes.
	guard       *guard
	maxResponse int
	logger      *zap.Logger
}

// networkMember is one member server and its guard.
type networkMember struct {
	id    string
	guard *guard
	own   bool // the handler's own guard (self), which the handler leaves
	// last is the member's answer as last read (nil: none kept): the
	// callers that get the same bytes, from the member's micro-cache or a
	// shared trip, share its reading too.
	last *atomic.Pointer[memberRead]
}

// memberRead is a member's answer and what network.ParseStatus made of it.
type memberRead struct {
	body   []byte
	status network.Status
	err    error
}

// read is what body, m's answer, says: read once for every caller that
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
		cluster:     c.Cluster,
		self:        c.Self,
		status:      t.byName["status"],
		guard:       own,
		maxResponse: int(l.MaxResponse),
		logger:      logger,
	}
	// A member's guard is named by its backend alone: a guard <name> of
	// this handler's names this handler's backend, not the members'.
	mc := bc
	mc.Guard = ""
	for i, s := range c.Servers {
		if s.ID == c.Self {
			n.members = append(n.members, networkMember{id: s.ID, guard: own, own: true, last: new(atomic.Pointer[memberRead])})
			continue
		}
		if err := backends[i].Provision(ctx); err != nil {
			return n, err
		}
		member := fmt.Sprintf("server %s (%s) of network %s in %s", s.ID, backends[i], c.Cluster, handlerAt(ctx, own.backend))
		ml := l
		if s.declared != nil {
			// A server declared once is counted with its own limits,
			// whichever handler's network lists it.
			member = fmt.Sprintf("server %s (%s, declared once) of network %s in %s", s.ID, backends[i], c.Cluster, handlerAt(ctx, own.backend))
			var err error
			if ml, _, err = resolveGuard(withServer(mc, s.declared)); err != nil {
				return n, fmt.Errorf("network.servers[%d] '%s': %w", i, s.ID, err)
			}
		}
		g, err := joinGuard(app, ctx, mc, ml, backends[i], policy, logger, member)
		if err != nil {
			return n, fmt.Errorf("network.servers[%d] '%s': %w", i, s.ID, err)
		}
		n.members = append(n.members, networkMember{id: s.ID, guard: g, last: new(atomic.Pointer[memberRead])})
		m.ExportGuard(g.units("", l))
	}
	return n, nil
}

// leaveGuards gives the members' guards back to the pool (nil: no network).
func (n *networkState) leaveGuards() {
	if n == nil {
		return
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

// fetch answers the request r that t describes with the network document:
// every member's /status, fetched at once through the member's guard as a
// whole answer (the one every caller of the network shares, in the
// member's micro-cache and coalesced trips), each within its guard's
// budget. A member that does not answer with a well-formed status in time
// is left out and listed in meta.unreachable. The document goes through the
// field layer for a caller who gets it, and is written to pw like a held
// answer, within the caller's share of the held bytes. A refusal of the
// caller's own at a member (429: its per-client or key cap, its share of
// the held bytes, a rate limit after statusgate) is the request's.
func (n *networkState) fetch(pw *progress.Writer, r *http.Request, t *ticket) verdict {
	if err := n.guard.held.Check(t.who.holder, t.who.held); err != nil {
		return heldRefusal(err)
	}
	answers := make([]memberAnswer, len(n.members))
	var wg sync.WaitGroup
	for i, m := range n.members {
		mr, mt := n.memberRequest(m, r, t)
		wg.Go(func() { answers[i] = n.ask(m, mr, mt) })
	}
	wg.Wait()
	if err := r.Context().Err(); err != nil {
		return contextRefusal(err) // the caller left: nothing to say of the members
	}

	doc := network.Document{Cluster: n.cluster, ThisServer: n.self}
	for i, a := range answers {
		m := n.members[i]
		switch {
		case a.refusal != nil:
			return *a.refusal
		case a.left != nil:
			if a.logAs != 0 {
				logFailure(n.logger.With(zap.String("network_member", m.id)), a.logAs, n.status, a.left)
			}
			doc.Unreachable = append(doc.Unreachable, m.id)
		default:
			doc.Members = append(doc.Members, network.Member{ID: m.id, Status: a.status})
		}
	}
	body, err := ownAnswer(doc.AppendData(nil), doc.AppendMeta(nil), t.who, t.ep)
	if err != nil {
		// The gateway rendered this body itself; failing here is a bug.
		n.logger.Error("filtering the network document", zap.Error(err))
		return verdict{outcome: metrics.BackendError, status: http.StatusInternalServerError}
	}
	outcome := metrics.Served
	if t.who.filtered() {
		outcome = metrics.Filtered
	}
	hdr := http.Header{}
	apijson.SetHeaders(hdr)
	setCORS(hdr)
	return n.guard.deliver(pw, t.who, &coalesce.Result{Status: http.StatusOK, Header: hdr, Body: body}, false, false, outcome)
}

// statusPath is what a member is asked for.
const statusPath = "/api/v1/status"

// memberRequest is the request for m's /status on behalf of the request r
// that t describes, and its ticket: r's canonical request (its key taken
// off, its Host, its context and budget), for /api/v1/status without a
// query, asking for an unencoded JSON body the gateway can read. Its
// caller is t's, but for the answer's class: whole, the one every caller
// of the network shares; the trip counts against the caller's per-client
// place or key cap, in its admission class, at the member.
func (n *networkState) memberRequest(m networkMember, r *http.Request, t *ticket) (*http.Request, *ticket) {
	who := t.who
	who.authenticated = true
	u := *r.URL
	u.Path, u.RawPath, u.RawQuery = statusPath, "", ""
	mr := r.WithContext(r.Context()) // a shallow copy for the ticket; backgroundRequest copies it whole
	mr.URL, mr.RequestURI = &u, u.RequestURI()
	next := t.next
	if !m.own && n.guard.backend == nil {
		// The form of 1.0: what follows statusgate is the way to the
		// handler's backend (a reverse_proxy), not to this member's.
		next = passOn
	}
	mt := m.guard.ticket(mr, n.status, who, statusPath, m.guard.resolve(mr.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)), next)
	// Its own replacer and variables: the members are asked at once, and
	// Caddy's are the caller's, which the handlers after statusgate and the
	// proxy write to.
	bg := backgroundRequest(mr.Context(), mr, mt)
	setEventAccept(bg.Header) // JSON the gateway can read, unencoded
	delete(bg.Header, "Last-Event-Id")
	return bg, mt
}

// passOn is what follows statusgate for a member's trip in the form of
// 1.0: nothing, so that the trip goes to the member's own proxy.
var passOn = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

// memberAnswer is what one member answered: its status, or why it is left
// out, or a refusal of the caller's own.
type memberAnswer struct {
	status network.Status
	left   error // why the member is left out; nil: status is its answer
	// logAs is the status a member left out is logged under as a backend
	// failure; 0: not one (the member's guard was busy), or one logged
	// already (the same answer, read before).
	logAs   int
	refusal *verdict
}

// ask fetches m's status with the request r that t describes.
func (n *networkState) ask(m networkMember, r *http.Request, t *ticket) (a memberAnswer) {
	rec := &capture{header: http.Header{}, limit: n.maxResponse}
	defer func() {
		// An answer that broke off ends in http.ErrAbortHandler, which
		// net/http would have caught for a caller; here nobody would.
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				n.logger.Error("fetching a network member's status failed", zap.String("network_member", m.id), zap.Any("panic", p))
			}
			a = memberAnswer{left: errBrokeOff, logAs: http.StatusBadGateway}
			if rec.over {
				// Streamed past max_response: the write that went over
				// failed, and the proxy gave up.
				a.left = errMemberTooLarge
			}
		}
	}()
	v := m.guard.fetch(progress.New(rec, 0), r, t)
	switch {
	case v.status == http.StatusTooManyRequests:
		a.refusal = &v
		return a
	case v.status != 0 || v.cut:
		a.left = cmp.Or(v.cause, errBrokeOff)
		if v.failed() {
			a.logAs = cmp.Or(v.status, http.StatusBadGateway)
		}
		return a
	case rec.over:
		a.left = errMemberTooLarge
	case rec.status != http.StatusOK:
		a.left = fmt.Errorf("the member answered %d", rec.status)
	default:
		read, fresh := m.read(rec.body)
		a.status, a.left = read.status, read.err
		if !fresh {
			return a // a failure in it was logged when it was first read
		}
	}
	a.logAs = http.StatusBadGateway
	return a
}

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
