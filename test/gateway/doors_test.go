package gateway

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// Side doors an attacker of the gateway tries once the front door holds.

// TestHTTP10NeverTruncated asks over HTTP/1.0, which has no chunked encoding,
// for a filtered answer that breaks off after 1 MB: a client that cannot tell
// a clean close from the end of the body must get a 502, not a 200 that ends
// early. Within max_response it gets the whole answer with its length.
func TestHTTP10NeverTruncated(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be, "max_response 256KiB")
	anon := "/api/v1/player/" + Alex
	be.Misbehave(SendLateError)
	r := sendHTTP10(t, anon)
	be.Misbehave(Behave)
	if r.Status != http.StatusBadGateway || !strings.Contains(string(r.Body), `"message":"Bad gateway"`) {
		t.Errorf("HTTP/1.0, broken past max_response: %d %q; want the 502 envelope", r.Status, Clip(r.Body))
	}
	r = sendHTTP10(t, anon)
	if r.Status != http.StatusOK || r.Header.Get("Content-Length") == "" || strings.Contains(string(r.Body), `"op":`) {
		t.Errorf("HTTP/1.0: %d, Content-Length %q, %s", r.Status, r.Header.Get("Content-Length"), Clip(r.Body))
	}
}

// sendHTTP10 sends an HTTP/1.0 GET and reads the answer to the close.
func sendHTTP10(t *testing.T, target string) Response {
	t.Helper()
	conn, err := net.DialTimeout("tcp", GatewayAddr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(Patience))
	fmt.Fprintf(conn, "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", target, GatewayAddr)
	res, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: "GET"})
	if err != nil {
		return Response{Err: err}
	}
	r := Response{Status: res.StatusCode, Header: res.Header}
	r.Body, r.Err = io.ReadAll(res.Body)
	return r
}

// TestPerClientByIPv6Prefix: two addresses of one /64 are one client for
// max_per_client, a third from another /64 is another.
func TestPerClientByIPv6Prefix(t *testing.T) {
	be := NewBackend(t)
	Gateway{
		Upstream:   be.Addr(),
		Statusgate: []string{"key " + KeyA, "max_per_client 1", "coalesce off"},
		Shared:     true,
		Global:     []string{"log {\n\t\tlevel ERROR\n\t}", "servers {\n\t\ttrusted_proxies static 127.0.0.0/8\n\t\ttrusted_proxies_strict\n\t}"},
	}.Start(t)
	be.HoldAnswers()
	defer be.Release()
	target := "/api/v1/player/" + Alex
	codes := make([]int, 3)
	from := []string{"2001:db8:1:2::1", "2001:db8:1:2:dead:beef:0:2", "2001:db8:1:3::1"}
	get := func(i int) {
		codes[i] = Send(t, "GET", fmt.Sprintf("%s?n=%d", target, i), "X-Forwarded-For: "+from[i]).Status
	}
	// The first holds its client's one place at the backend (its answer
	// held) while the other two ask.
	var wg sync.WaitGroup
	wg.Go(func() { get(0) })
	fixture.WaitFor(t, "the first at the backend", func() bool { return be.AtBackend() == 1 })
	get(1)
	wg.Go(func() { get(2) })
	fixture.WaitFor(t, "the third at the backend", func() bool { return be.AtBackend() == 2 })
	be.Release()
	wg.Wait()
	if codes[0] != 200 || codes[1] != http.StatusTooManyRequests || codes[2] != 200 {
		t.Errorf("one /64 twice and another /64: %v, want [200 429 200]", codes)
	}
}

// TestShareKeyHasHost puts one statusgate handler in front of two backends,
// chosen by the Host (a hoster's map): the cache and coalescing never give
// one host's answer to a caller of the other.
func TestShareKeyHasHost(t *testing.T) {
	survival, creative := NewBackend(t), NewBackend(t)
	survival.Respond = func(*url.URL) (int, []byte) { return http.StatusOK, Envelope(`{"online":["survival"]}`) }
	creative.Respond = func(*url.URL) (int, []byte) { return http.StatusOK, Envelope(`{"online":["creative"]}`) }
	Gateway{
		Upstream:   "{backend}",
		Statusgate: []string{"key " + KeyA},
		Shared:     true,
		Site:       []string{fmt.Sprintf("map {host} {backend} {\n\t\tsurvival.test %s\n\t\tcreative.test %s\n\t}", survival.Addr(), creative.Addr())},
	}.Start(t)
	status := "/api/v1/status"
	for _, host := range []string{"survival.test", "creative.test", "survival.test", "creative.test"} {
		r := Send(t, "GET", status, "Host: "+host)
		name := strings.TrimSuffix(host, ".test")
		if r.Status != 200 || !strings.Contains(string(r.Body), `"online":["`+name+`"]`) {
			t.Errorf("Host %s: %d %s", host, r.Status, Clip(r.Body))
		}
	}
}
