package caddymodule

// This file is the live streams: a GET with Accept: text/event-stream of an
// endpoint with a cache or snapshot time gets server-sent events, each the
// envelope a plain GET would get (docs/live.md). The streams of one answer
// share one poller (internal/live), which fetches through the guard like
// any caller, each poll charged to one of the viewers, so the backend sees
// one trip per interval however many watch, and no viewer makes it work
// harder than its own plain GETs could.

import (
	"bytes"
	"cmp"
	"errors"
	"math/rand/v2"
	"mime"
	"net/http"
	"strings"
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/coalesce"
	"github.com/statusgate/statusgate/caddymodule/internal/cors"
	"github.com/statusgate/statusgate/caddymodule/internal/guard"
	"github.com/statusgate/statusgate/caddymodule/internal/live"
	"github.com/statusgate/statusgate/caddymodule/internal/metrics"
	"github.com/statusgate/statusgate/caddymodule/internal/progress"
	"go.uber.org/zap"
)

// retryHint is the reconnection delay a stream asks of EventSource, in
// milliseconds: after a reload every viewer reconnects, and a spread of a
// few seconds is kinder to the new config than all at once.
const retryHint = "3000"

// end ends every stream of the handler at once: its clients reconnect, to
// the config that replaces this one. The load's "stopping" event
// (App.Handle) ends it: Caddy emits the event while a reload or a stop
// waits, so it does not wait for the polls at the backend.
func (lv *liveState) end() {
	if lv != nil {
		lv.streams.End()
	}
}

// close is end, and waits for the topics' polls to return: Cleanup's.
func (lv *liveState) close() {
	if lv != nil {
		lv.streams.Close()
	}
}

// wants reports whether r asks for a live stream of ep: a GET whose
// Accept names text/event-stream with a weight above 0, of an endpoint with
// a cache or snapshot time. Any other request is answered as a plain GET,
// whatever its Accept.
func (lv *liveState) wants(r *http.Request, ep *endpoint) bool {
	if r.Method != http.MethodGet || lv == nil || (ep.CacheTTL <= 0 && ep.Snapshot <= 0) {
		return false
	}
	for _, v := range r.Header.Values("Accept") {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(part)
			if err != nil || mt != "text/event-stream" {
				continue
			}
			q, ok := params["q"]
			if !ok {
				return true
			}
			// A weight of 0 refuses the type; one that is not a qvalue
			// asks for nothing the gateway can be sure of: the plain
			// answer, which every client can read.
			if w, ok := qvalue(q); ok && w > 0 {
				return true
			}
		}
	}
	return false
}

// qvalue is an Accept weight in thousandths, if q is one as HTTP writes
// it: 0 or 1, with up to three decimals, and no more than 1 ("0.5",
// "0.000", "1.0"; not ".5", "0.0001", "1.5" or "-0").
func qvalue(q string) (int, bool) {
	if q == "" || q[0] != '0' && q[0] != '1' {
		return 0, false
	}
	w := int(q[0]-'0') * 1000
	if len(q) == 1 {
		return w, true
	}
	frac := q[1:]
	if frac[0] != '.' || len(frac) > 4 {
		return 0, false
	}
	scale := 100
	for _, c := range []byte(frac[1:]) {
		if c < '0' || c > '9' {
			return 0, false
		}
		w += int(c-'0') * scale
		scale /= 10
	}
	if w > 1000 {
		return 0, false
	}
	return w, true
}

// serve is the backend step of a live stream: ServeHTTP's fetch for a
// caller that asked for one, after every check of a plain GET, writing to
// pw. It asks the guard for a stream (guard.Streams.Open: a seat, the
// request's head, requestHead's head bytes, charged to the viewer's share
// of the held bytes, and the answer's topic, whose polls are charged to its
// viewers in turn), which makes the opening fetch, the viewer's own (a 429
// of its limits is its answer), when the topic is new, and writes each new
// answer as an event until the client leaves, the stream's
// lifetime is over, a reload, a keyed caller or a poll refused to the
// viewer ends it, or the client stops taking what is written
// (write_timeout: the stream is cut and its seat given back).
func (lv *liveState) serve(pw *progress.Writer, r *http.Request, t *guard.Ticket, answer answerFunc, head int64) guard.Verdict {
	who := t.Caller
	viewer := guard.Viewer{
		Head: head, LastID: r.Header.Get("Last-Event-ID"),
		By: &charge{who: who, client: placeholderValue(r, placeholderClient), key: placeholderValue(r, placeholderKey)},
	}
	// A new topic opens with the viewer's own fetch, as its plain GET would
	// be (the micro-cache, a shared trip, or a trip charged to its limits
	// and a rate_limit after statusgate): over a limit of its own, it gets
	// that GET's 429 instead of a stream.
	first := func() ([]byte, time.Duration, guard.Verdict) {
		delete(r.Header, "Last-Event-Id") // the stream's, not the backend's
		guard.AcceptJSON(r.Header)
		v, body, status := lv.fetch(r, t, answer)
		if coalesce.CallersOwn(status) {
			// A refusal made for this viewer's request (its limits, a
			// rate_limit after statusgate, the network's loop refusal of
			// its header, a 401 or 403 of a panel or the backend) is its
			// plain GET's answer, not the first event of the viewers who
			// join the topic next.
			return nil, 0, ownRefusal(v, status)
		}
		return body, liveInterval(t.Station, body), guard.Verdict{}
	}
	st, refused := lv.streams.Open(r, t, viewer, first, func() live.Fetch { return lv.poller(r, t, answer) })
	if st == nil {
		return refused
	}
	defer st.Close()
	t.Station.Metrics.StreamOpened()
	defer t.Station.Metrics.StreamClosed()

	hdr := pw.Header()
	cors.Set(hdr)
	hdr.Set("Content-Type", "text/event-stream")
	// no-transform: Caddy's encode leaves the stream as it is (it honours
	// the response's no-transform). Compressed, a stream would hold a
	// compressor for its whole life, 0.4 MiB with gzip and 1.1 MiB with
	// zstd, ten to thirty times the rest of the stream, for events of a few
	// hundred bytes that mostly repeat what the viewer has; proxies in
	// front are told the same.
	hdr.Set("Cache-Control", "no-store, no-transform")
	hdr.Set("X-Content-Type-Options", "nosniff")
	hdr.Set("X-Accel-Buffering", "no") // nginx in front: do not buffer
	pw.WriteHeader(http.StatusOK)
	if err := lv.send(pw, retryLine); err != nil {
		return lv.ended(t.Station, err)
	}

	var lifetime <-chan time.Time
	if lv.limits.lifetime > 0 {
		// Less up to a tenth: streams opened together (after a reload) do
		// not all end, and reconnect, together.
		tm := time.NewTimer(lv.limits.lifetime - rand.N(lv.limits.lifetime/10+1))
		defer tm.Stop()
		lifetime = tm.C
	}
	heartbeat := time.NewTimer(lv.limits.heartbeat)
	defer heartbeat.Stop()
	for {
		select {
		case <-r.Context().Done():
			return guard.Verdict{Outcome: metrics.Streamed}
		case <-st.Done():
			return guard.Verdict{Outcome: metrics.Streamed}
		case <-st.TakenOver():
			// A keyed caller took the seat over: the client reconnects.
			return guard.Verdict{Outcome: metrics.Streamed}
		case <-lifetime:
			return guard.Verdict{Outcome: metrics.Streamed}
		case <-heartbeat.C:
			if err := lv.send(pw, heartbeatLine); err != nil {
				return lv.ended(t.Station, err)
			}
		case <-st.Ready():
			// Held for the client until it has taken it, within its share
			// of the held bytes; past it the stream ends, and the reconnect
			// is refused until the client has taken what it holds.
			sent, err := st.Send(pw, func(wire []byte) error { return lv.send(pw, wire) }) // encoded once for every stream
			if err != nil {
				return lv.ended(t.Station, err)
			}
			if !sent {
				continue
			}
			t.Station.Metrics.EventSent()
		}
		heartbeat.Reset(lv.limits.heartbeat)
	}
}

// ownRefusal is the answer of a viewer whose stream's opening fetch was a
// refusal made for its request (coalesce.CallersOwn) of the given status:
// the gateway's own refusal v, or, when the refusal is the answer of a
// handler after statusgate, a panel or the backend, the gateway's
// envelope of its status.
func ownRefusal(v guard.Verdict, status int) guard.Verdict {
	if v.Status != 0 {
		return v
	}
	if status == http.StatusTooManyRequests {
		return guard.TooMany(nil)
	}
	return guard.Verdict{Outcome: metrics.Refused, Status: status}
}

// requestHead is what a stream's request keeps for as long as the stream
// lasts, in bytes: its target and its header names and values as the client
// sent them, a Last-Event-ID among them as long as the server's header limit
// allows (1 MB by default). The server, and Caddy's copy of the request for
// its logs, keep them until the handler returns, whatever the gateway drops
// or keeps; so the stream is charged for them (guard.Viewer.Head). Measured before the
// request is rewritten for the backend.
func requestHead(r *http.Request) int64 {
	n := len(r.RequestURI)
	for name, values := range r.Header {
		for _, v := range values {
			n += len(name) + len(v)
		}
	}
	return int64(n)
}

// The stream's lines that are always the same.
var (
	retryLine     = []byte("retry: " + retryHint + "\n\n")
	heartbeatLine = []byte(":\n\n")
)

// encodeEvent is the hub's Encoder: each answer as a server-sent event,
// written once for every stream of its topic.
func encodeEvent(ev live.Event) []byte {
	return appendEvent(make([]byte, 0, len(ev.Data)+64), ev)
}

// errStalled is why a write to a stream failed when the client took
// nothing of it within write_timeout.
var errStalled = errors.New("the viewer took nothing within write_timeout")

// send writes p to the stream and flushes it, within write_timeout, and
// lifts the deadline until the next send (an HTTP/2 stream whose deadline
// passes while it waits for its next event is reset). A write that fails
// after the whole timeout failed because the client took nothing (the
// deadline, on HTTP/1 and HTTP/2 alike); one that fails sooner, because the
// client left.
func (lv *liveState) send(pw *progress.Writer, p []byte) error {
	start := time.Now()
	_, err := pw.Write(p)
	if err == nil {
		err = pw.FlushError()
	}
	if err == nil {
		pw.Disarm()
		return nil
	}
	if lv.limits.writeTimeout > 0 && time.Since(start) >= lv.limits.writeTimeout {
		return errStalled
	}
	return err
}

// ended is the end of a stream whose write failed: a stalled viewer's
// connection (HTTP/1) or stream (HTTP/2) is cut and counted; a client that
// left just ended its stream.
func (lv *liveState) ended(ep *guard.Station, err error) guard.Verdict {
	if !errors.Is(err, errStalled) {
		return guard.Verdict{Outcome: metrics.Streamed}
	}
	ep.Metrics.ViewerCut()
	return guard.Verdict{Outcome: metrics.StreamCut, Cut: true}
}

// appendEvent appends ev as a server-sent event: its id, then its data, a
// data line per line of the answer (a backend that sends its JSON on several
// lines gets them back joined with '\n', as EventSource joins them), then a
// blank line.
func appendEvent(b []byte, ev live.Event) []byte {
	b = append(b, "id: "...)
	b = append(b, ev.ID...)
	b = append(b, '\n')
	data := ev.Data
	for {
		i := bytes.IndexAny(data, "\r\n")
		if i < 0 {
			break
		}
		b = append(b, "data: "...)
		b = append(b, data[:i]...)
		b = append(b, '\n')
		if data[i] == '\r' && i+1 < len(data) && data[i+1] == '\n' {
			i++
		}
		data = data[i+1:]
	}
	b = append(b, "data: "...)
	b = append(b, data...)
	return append(b, '\n', '\n')
}

// liveState is one handler's live streams: the guard's door to them, ended
// with the handler (a reload), their bounds, and the guard whose answers
// they carry (topicPolls). Their seats and what their topics keep are the
// guard's, bounded by the newest load's limits and kept, with the streams
// they count, across reloads.
type liveState struct {
	topicPolls
	limits  liveLimits
	streams *guard.Streams
}

// newLive sets up the live streams of a handler whose guard is g, bounded
// by l.
func newLive(l liveLimits, g *guard.Guard, m *metrics.Metrics, logger *zap.Logger) *liveState {
	streams := g.Streams(guard.StreamsConfig{
		PerClient: l.perClient, Lifetime: cmp.Or(l.lifetime, defaultStreamLifetime), Encode: encodeEvent, Metrics: m,
	})
	return &liveState{topicPolls: topicPolls{guard: g, logger: logger}, limits: l, streams: streams}
}
