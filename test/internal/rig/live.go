package rig

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
)

// Live streams (docs/live.md) through a real Caddy: server-sent events on
// the same URLs, the same answers as a plain GET, one trip for everyone.

// LiveStream is a client's view of one stream.
type LiveStream struct {
	Resp *http.Response
	Rd   *bufio.Reader
}

// SSEItem is what a stream sent next: an event, a comment (a heartbeat), the
// reconnection hint, or the stream's end.
type SSEItem struct {
	ID, Data string
	Comment  bool
	Retry    bool
	End      bool
}

// OpenLive opens a stream of target on the gateway with the header lines
// given; client nil is http.DefaultClient (HTTP/1.1). The answer is the
// stream if it is one, else its status and body are in resp.
func OpenLive(t *testing.T, client *http.Client, target string, headers ...string) *LiveStream {
	t.Helper()
	req, _ := http.NewRequest("GET", GatewayURL+target, nil)
	req.Header.Set("Accept", "text/event-stream")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		req.Header.Set(k, v)
	}
	if client == nil {
		client = http.DefaultClient
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	var body io.Reader = resp.Body
	if resp.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		body = zr
	}
	return &LiveStream{Resp: resp, Rd: bufio.NewReader(body)}
}

func (s *LiveStream) Close() { s.Resp.Body.Close() }

// Next reads the stream's next item: the lines up to a blank line.
func (s *LiveStream) Next(t *testing.T) SSEItem {
	t.Helper()
	ch := make(chan SSEItem, 1)
	go func() {
		var it SSEItem
		var data []string
		for {
			line, err := s.Rd.ReadString('\n')
			if err != nil {
				ch <- SSEItem{End: true}
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				it.Data = strings.Join(data, "\n")
				ch <- it
				return
			case strings.HasPrefix(line, ":"):
				it.Comment = true
			case strings.HasPrefix(line, "retry: "):
				it.Retry = true
			case strings.HasPrefix(line, "id: "):
				it.ID = line[4:]
			case strings.HasPrefix(line, "data: "):
				data = append(data, line[6:])
			}
		}
	}()
	return fixture.Recv(t, ch, "the stream's next item")
}

// NextEvent reads past the hint and heartbeats to the next event, or the end.
func (s *LiveStream) NextEvent(t *testing.T) SSEItem {
	t.Helper()
	for {
		if it := s.Next(t); !it.Comment && !it.Retry {
			return it
		}
	}
}

// WantStream asserts that s is a stream.
func (s *LiveStream) WantStream(t *testing.T, what string) {
	t.Helper()
	if s.Resp.StatusCode != 200 || s.Resp.Header.Get("Content-Type") != "text/event-stream" || s.Resp.Header.Get("Cache-Control") != "no-store, no-transform" {
		b, _ := io.ReadAll(io.LimitReader(s.Rd, 1000))
		t.Fatalf("%s: %d %v %s, want a stream", what, s.Resp.StatusCode, s.Resp.Header, b)
	}
}

// LiveBackend is be answering status with a body the test changes, and
// counting the status trips.
func LiveBackend(t *testing.T) (be *Backend, set func(online int), trips func() int) {
	be = NewBackend(t)
	var online atomic.Int32
	var n atomic.Int32
	be.Respond = func(u *url.URL) (int, []byte) {
		if u.Path == "/api/v1/status" {
			n.Add(1)
			return 200, Envelope(fmt.Sprintf(`{"online":[%q],"minecraft":%d,"discord":3}`, Alex, online.Load()))
		}
		return BackendResponse(u)
	}
	return be, func(v int) { online.Store(int32(v)) }, func() int { return int(n.Load()) }
}

// H2C is a client that speaks HTTP/2 without TLS, as the gateway does with
// protocols h1 h2c.
func H2C() *http.Client {
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetUnencryptedHTTP2(true)
	return &http.Client{Transport: tr}
}

// WantBusy asserts the gateway's 503 Backend busy with Retry-After.
func WantBusy(t *testing.T, r Response, path string) {
	t.Helper()
	WantError(t, r, http.StatusServiceUnavailable, path)
	if r.Header.Get("Retry-After") == "" {
		t.Errorf("%s: 503 without Retry-After", path)
	}
}
