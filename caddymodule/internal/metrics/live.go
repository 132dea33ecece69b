package metrics

import "github.com/prometheus/client_golang/prometheus"

// Live streams (server-sent events, caddymodule/internal/live) are counted
// apart from requests: a stream is one request that lasts minutes, and what
// an operator needs to see is how many are open, how much they carry, and
// how many are turned away or cut, and why.

// Reasons a stream is refused, the values of the reason label.
const (
	StreamRefusedTotal     = "max_streams"            // every seat of the guard is taken
	StreamRefusedPerClient = "max_streams_per_client" // the client has its share
	StreamRefusedHeld      = "max_held"               // the held bytes' budget
	StreamRefusedReload    = "reload"                 // the config is being replaced
	StreamRefusedTopics    = "max_topics"             // every topic's place is taken
)

var streamRefusedReasons = []string{StreamRefusedTotal, StreamRefusedPerClient, StreamRefusedHeld, StreamRefusedReload, StreamRefusedTopics}

// liveCollectors are the families of the live streams.
type liveCollectors struct {
	open    *prometheus.GaugeVec
	events  *prometheus.CounterVec
	cut     *prometheus.CounterVec
	refused *prometheus.CounterVec
}

func newLiveCollectors() liveCollectors {
	return liveCollectors{
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: namespace, Subsystem: subsystem, Name: "streams_open",
			Help: "Live streams (server-sent events) open now, by endpoint."}, []string{"endpoint"}),
		events: counterVec("stream_events_total",
			"Events written to live streams, by endpoint (heartbeats not counted).", "endpoint"),
		cut: counterVec("stream_viewers_cut_total",
			"Live streams cut because the viewer did not take what was written within write_timeout, by endpoint.", "endpoint"),
		refused: counterVec("streams_refused_total",
			"Live streams refused after every check of a plain GET passed, by reason: max_streams, max_streams_per_client, max_held, reload, max_topics.", "reason"),
	}
}

// liveEndpoint are one endpoint's live stream series.
type liveEndpoint struct {
	open   prometheus.Gauge
	events prometheus.Counter
	cut    prometheus.Counter
}

func (c *liveCollectors) endpoint(name string) liveEndpoint {
	return liveEndpoint{open: c.open.WithLabelValues(name), events: c.events.WithLabelValues(name), cut: c.cut.WithLabelValues(name)}
}

// StreamOpened counts a live stream that opened; StreamClosed, when it ends.
func (e *Endpoint) StreamOpened() {
	if e != nil {
		e.live.open.Inc()
	}
}

// StreamClosed counts the end of a stream StreamOpened counted.
func (e *Endpoint) StreamClosed() {
	if e != nil {
		e.live.open.Dec()
	}
}

// EventSent counts an event written to a live stream.
func (e *Endpoint) EventSent() {
	if e != nil {
		e.live.events.Inc()
	}
}

// ViewerCut counts a live stream cut for not reading.
func (e *Endpoint) ViewerCut() {
	if e != nil {
		e.live.cut.Inc()
	}
}

// StreamRefused counts a live stream refused for reason, one of the
// StreamRefused* constants; any other counts nothing.
func (m *Metrics) StreamRefused(reason string) {
	if m == nil {
		return
	}
	if c := m.streamRefused[reason]; c != nil {
		c.Inc()
	}
}
