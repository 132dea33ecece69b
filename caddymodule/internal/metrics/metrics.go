// Package metrics counts what statusgate decides, in Prometheus collectors
// registered with Caddy's metrics registry (caddy.Context.GetMetricsRegistry),
// so that they are scraped with Caddy's own caddy_http_* metrics from the
// admin endpoint or the metrics handler.
//
// Every label value comes from the config: endpoint names, key names, field
// names, guard names, and fixed sets such as the outcomes. None ever comes from a request, so
// the number of series is bounded by the config however callers behave. The
// API enforces it: label values are given once, to New, which creates every
// series; the request path then holds pre-resolved counters (an Endpoint per
// endpoint, a key's position) and has no way to name a new series. Counting a
// request is an atomic add on such a counter: a few nanoseconds, no
// allocation, no map lookup.
//
// The series the handlers count, all counters:
//
//	caddy_http_statusgate_requests_total{endpoint,outcome,server} requests, by endpoint, Outcome and the handler's server
//	caddy_http_statusgate_key_requests_total{key}               requests with an accepted key, by key name
//	caddy_http_statusgate_key_refused_total{key}                requests refused outside the key's scope
//	caddy_http_statusgate_unknown_key_requests_total            requests with a key that matches none
//	caddy_http_statusgate_fields_removed_total{endpoint,field}  responses a protected field was removed from
//	caddy_http_statusgate_filter_in_bytes_total{endpoint}       bytes read by the field layer
//	caddy_http_statusgate_filter_out_bytes_total{endpoint}      bytes written by the field layer
//
// and the series of the backend guards, read from the guards' own counters
// when scraped (see Guard), by guard name:
//
//	caddy_http_statusgate_backend_requests_in_flight{guard}       gauge: requests holding a backend slot
//	caddy_http_statusgate_backend_requests_queued{guard,class}    gauge: requests waiting for one, anonymous or keyed
//	caddy_http_statusgate_held_bytes{guard}                       gauge: answer bytes held for clients
//	caddy_http_statusgate_held_anonymous_bytes{guard}             gauge: those charged for anonymous callers
//	caddy_http_statusgate_topic_bytes{guard}                      gauge: bytes the live streams' topics keep
//	caddy_http_statusgate_cache_lookups_total{guard,result}       micro-cache lookups: hit, stale, miss
//	caddy_http_statusgate_cache_evictions_total{guard}            micro-cache entries evicted for room
//	caddy_http_statusgate_cache_entries{guard}                    gauge: micro-cache entries
//	caddy_http_statusgate_cache_bytes{guard}                      gauge: micro-cache bytes
//	caddy_http_statusgate_coalesce_requests_total{guard,role}     coalescing callers: led, shared, alone, abandoned
//	caddy_http_statusgate_coalesce_unshared_total{guard,reason}   leaders' answers not shared: released, unshareable
//	caddy_http_statusgate_coalesce_in_flight{guard}               gauge: trips identical requests can join
//	caddy_http_statusgate_coalesce_waiting{guard}                 gauge: requests waiting for a trip they joined
//	caddy_http_statusgate_backend_trips_kept{guard}               gauge: requests at the backend nobody waits for
//	caddy_http_statusgate_backend_trips_kept_total{guard,end}     such requests ended: answered, given_up
//	caddy_http_statusgate_backend_requests_unsent_total{guard}    requests not sent: their budget could not cover the answer
//
// Requests that match no configured endpoint (an unknown path, a preflight
// answered before routing) count under the endpoint OtherEndpoint, "_other",
// as Caddy counts hosts it was not configured for.
//
// Caddy makes a new registry for every config it loads (v2.11.9: in
// caddy.NewContext), so after a reload the collectors are new, start from
// zero as Caddy's own caddy_http_requests_total does, and carry only the
// label values of the new config: a removed key or endpoint leaves no stale
// series behind. The guards' series are the exception: a guard that the new
// config keeps carries its counts on (see Guard). Within one config, several
// statusgate handlers share the registry and the collectors, which the
// config load registers once (Register) and each handler takes its series
// of (Collectors.New), so a series that two handlers both configure sums
// both, and a guard they share counts once.
package metrics

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
)

// namespace and subsystem make the names caddy_http_statusgate_*, beside
// Caddy's caddy_http_* series.
const (
	namespace = "caddy"
	subsystem = "http_statusgate"
)

// OtherEndpoint is the endpoint label of requests that match no configured
// endpoint. It cannot be an endpoint's name.
const OtherEndpoint = "_other"

// Config lists every label value the metrics will carry.
type Config struct {
	// Endpoints are the names requests are counted under, e.g. "status",
	// "custom/votes". Each gets its series, for every outcome. Default:
	// none; requests then count under OtherEndpoint only.
	Endpoints []string

	// Fields are the protected field names of each endpoint, whose removal
	// is counted. Every key must be one of Endpoints. Default: none.
	Fields map[string][]string

	// Keys are the key names, in the order of the keyring, so that the
	// position the keyring matches selects the counter (KeyUsed). Default:
	// none.
	Keys []string

	// Server names the game server the handler fronts, the server label of
	// its requests: a declared server's name, or its guard's. Default: "".
	Server string
}

// Metrics is one handler's set of counters. A nil *Metrics counts nothing,
// so a handler without metrics needs no checks of its own.
type Metrics struct {
	endpoints  map[string]*Endpoint
	other      *Endpoint
	keys       []prometheus.Counter
	keyRefused []prometheus.Counter
	unknownKey prometheus.Counter
	guards     *guardCollector
	// streamRefused are the refused streams' counters, by reason.
	streamRefused map[string]prometheus.Counter
}

// Endpoint holds one endpoint's pre-resolved counters. A nil *Endpoint
// counts nothing.
type Endpoint struct {
	requests   [numOutcomes]prometheus.Counter
	fieldNames []string
	fields     []prometheus.Counter // parallel to fieldNames
	filterIn   prometheus.Counter
	filterOut  prometheus.Counter
	live       liveEndpoint
}

// Collectors are the families of one config load, registered once in its
// registry (Register), whose series its handlers count into (New).
type Collectors struct {
	requests   *prometheus.CounterVec
	keys       *prometheus.CounterVec
	unknownKey prometheus.Counter
	keyRefused *prometheus.CounterVec
	fields     *prometheus.CounterVec
	filterIn   *prometheus.CounterVec
	filterOut  *prometheus.CounterVec
	guards     *guardCollector
	live       liveCollectors
}

func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: namespace, Subsystem: subsystem, Name: name, Help: help}, labels)
}

func newCollectors() *Collectors {
	return &Collectors{
		requests: counterVec("requests_total",
			"Requests decided by statusgate, by endpoint, outcome and the game server the handler fronts (its declared name, or its guard's).", "endpoint", "outcome", "server"),
		keys: counterVec("key_requests_total",
			"Requests that presented an accepted API key, by the key's name.", "key"),
		keyRefused: counterVec("key_refused_total",
			"Requests with an accepted API key refused because the endpoint needs a key and is outside the key's scope, by the key's name.", "key"),
		unknownKey: prometheus.NewCounter(prometheus.CounterOpts{Namespace: namespace, Subsystem: subsystem,
			Name: "unknown_key_requests_total",
			Help: "Requests that presented an API key that matches no configured key."}),
		fields: counterVec("fields_removed_total",
			"Responses from which a protected field was removed, by endpoint and field.", "endpoint", "field"),
		filterIn: counterVec("filter_in_bytes_total",
			"Response bytes from the backend that went through the field layer.", "endpoint"),
		filterOut: counterVec("filter_out_bytes_total",
			"Response bytes the field layer wrote to callers.", "endpoint"),
		guards: new(guardCollector),
		live:   newLiveCollectors(),
	}
}

// Register makes the families of a config load and registers them with
// reg, Caddy's registry for the config being loaded: call it once per load.
// An error is a registry conflict to refuse the config with; Caddy then
// drops the registry it made for that config (each load has its own, from
// caddy.NewContext), and with it what this call registered before the
// error, so it is not unregistered here.
func Register(reg *prometheus.Registry) (*Collectors, error) {
	c := newCollectors()
	for _, f := range c.families() {
		if err := reg.Register(f); err != nil {
			return nil, fmt.Errorf("registering statusgate metrics: %v", err)
		}
	}
	return c, nil
}

// families are c's collectors, each registered on its own.
func (c *Collectors) families() []prometheus.Collector {
	return []prometheus.Collector{c.requests, c.keys, c.keyRefused, c.unknownKey, c.fields, c.filterIn, c.filterOut, c.guards,
		c.live.open, c.live.events, c.live.cut, c.live.refused}
}

// New creates one handler's series, of every label value in cfg, in the
// load's collectors c (nil: collectors of the handler's own, registered
// nowhere, which count without exporting, for tests of a handler). Call it
// from Provision; the error, if any, is a config mistake to refuse the
// config with.
func (c *Collectors) New(cfg Config) (*Metrics, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if c == nil {
		c = newCollectors()
	}
	m := &Metrics{
		endpoints:  make(map[string]*Endpoint, len(cfg.Endpoints)),
		unknownKey: c.unknownKey,
		guards:     c.guards,
	}
	for _, name := range cfg.Endpoints {
		m.endpoints[name] = c.endpoint(name, cfg.Fields[name], cfg.Server)
	}
	m.other = c.other(cfg.Server)
	m.streamRefused = make(map[string]prometheus.Counter, len(streamRefusedReasons))
	for _, reason := range streamRefusedReasons {
		m.streamRefused[reason] = c.live.refused.WithLabelValues(reason)
	}
	for _, name := range cfg.Keys {
		m.keys = append(m.keys, c.keys.WithLabelValues(name))
		m.keyRefused = append(m.keyRefused, c.keyRefused.WithLabelValues(name))
	}
	// The unknown-key counter has no labels: it exists from registration on.
	return m, nil
}

func (c *Collectors) endpoint(name string, fields []string, server string) *Endpoint {
	e := &Endpoint{
		filterIn:  c.filterIn.WithLabelValues(name),
		filterOut: c.filterOut.WithLabelValues(name),
		live:      c.live.endpoint(name),
	}
	for o := range numOutcomes {
		e.requests[o] = c.requests.WithLabelValues(name, o.String(), server)
	}
	for _, f := range fields {
		if !slices.Contains(e.fieldNames, f) {
			e.fieldNames = append(e.fieldNames, f)
			e.fields = append(e.fields, c.fields.WithLabelValues(name, f))
		}
	}
	return e
}

// other is the Endpoint of requests that match no endpoint. Only their
// request counts are exported; nothing is filtered for them, so
// its other counters are left unregistered rather than adding series that
// could only ever be zero.
func (c *Collectors) other(server string) *Endpoint {
	discard := prometheus.NewCounter(prometheus.CounterOpts{Name: "statusgate_unexported"})
	e := &Endpoint{filterIn: discard, filterOut: discard}
	for o := range numOutcomes {
		e.requests[o] = c.requests.WithLabelValues(OtherEndpoint, o.String(), server)
	}
	return e
}

func (cfg *Config) check() error {
	seen := make(map[string]bool, len(cfg.Endpoints))
	for _, name := range cfg.Endpoints {
		switch {
		case name == "" || !utf8.ValidString(name):
			return fmt.Errorf("metrics: invalid endpoint name %q", name)
		case name == OtherEndpoint:
			return fmt.Errorf("metrics: endpoint name %q is reserved for requests that match no endpoint", name)
		case seen[name]:
			return fmt.Errorf("metrics: endpoint %q listed twice", name)
		}
		seen[name] = true
	}
	for ep, fields := range cfg.Fields {
		if !seen[ep] {
			return fmt.Errorf("metrics: fields of endpoint %q, which is not among the endpoints", ep)
		}
		for _, f := range fields {
			if f == "" || !utf8.ValidString(f) {
				return fmt.Errorf("metrics: invalid field name %q of endpoint %q", f, ep)
			}
		}
	}
	keys := make(map[string]bool, len(cfg.Keys))
	for _, name := range cfg.Keys {
		switch {
		case name == "" || !utf8.ValidString(name):
			return fmt.Errorf("metrics: invalid key name %q", name)
		case keys[name]:
			return fmt.Errorf("metrics: key name %q listed twice", name)
		}
		keys[name] = true
	}
	return nil
}

// Endpoint returns the counters of the configured endpoint name, or nil (which
// counts nothing) for a name that was not in Config.Endpoints. Resolve it once
// at provision time and keep it with the endpoint.
func (m *Metrics) Endpoint(name string) *Endpoint {
	if m == nil {
		return nil
	}
	return m.endpoints[name]
}

// Other returns the counters of requests that match no configured endpoint.
func (m *Metrics) Other() *Endpoint {
	if m == nil {
		return nil
	}
	return m.other
}

// KeyUsed counts a request that presented the key at position i of
// Config.Keys (the keyring's Match). A position out of range counts nothing.
func (m *Metrics) KeyUsed(i int) {
	if m == nil || uint(i) >= uint(len(m.keys)) {
		return
	}
	m.keys[i].Inc()
}

// KeyRefused counts a request refused although it presented the key at
// position i of Config.Keys: the endpoint needs a key, and this one's scope
// does not open it. A position out of range counts nothing.
func (m *Metrics) KeyRefused(i int) {
	if m == nil || uint(i) >= uint(len(m.keyRefused)) {
		return
	}
	m.keyRefused[i].Inc()
}

// UnknownKey counts a request that presented a key matching no configured
// key.
func (m *Metrics) UnknownKey() {
	if m == nil {
		return
	}
	m.unknownKey.Inc()
}

// Count counts a request with outcome o. A value that is not an Outcome
// counts nothing.
func (e *Endpoint) Count(o Outcome) {
	if e == nil || o >= numOutcomes {
		return
	}
	e.requests[o].Inc()
}

// FieldsRemoved counts a response from which the named fields were removed
// (jsonfilter's Filter.Hidden): one per name, however often the field
// occurred. Names that are not the endpoint's configured fields count nothing.
func (e *Endpoint) FieldsRemoved(names []string) {
	if e == nil {
		return
	}
	for _, n := range names {
		if i := slices.Index(e.fieldNames, n); i >= 0 {
			e.fields[i].Inc()
		}
	}
}

// FilterBytes counts the bytes one response brought into the field layer and
// the bytes it wrote out; the handler counts responses that went out whole.
func (e *Endpoint) FilterBytes(in, out int64) {
	if e == nil {
		return
	}
	if in > 0 {
		e.filterIn.Add(float64(in))
	}
	if out > 0 {
		e.filterOut.Add(float64(out))
	}
}
