package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestOverlongTargets: a path under /api longer than 1024 bytes is the
// gateway's 404 before anything reads it, even with a key, and never reaches
// the backend; one at the bound still does. A 16 000-character key or
// parameter gets the plain 404 on a hidden endpoint and an unknown one alike
// (as it does without the bounds).
// (That they also take the same time is BenchmarkDisguiseTiming's, in
// caddymodule.)
func TestOverlongTargets(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be)
	atBound := 1024 - len("/v1/worlds/")
	over := "/api/v1/worlds/" + strings.Repeat("w", atBound+1)
	WantNotFound(t, Send(t, "GET", over, WithKey(KeyA)), over)
	over = "/api/worlds/" + strings.Repeat("w", atBound+4) // the alias, bounded as written
	WantNotFound(t, Send(t, "GET", over, WithKey(KeyA)), over)
	be.WantSeen(t, "over the bound")

	at := "/api/v1/worlds/" + strings.Repeat("w", atBound)
	if r := Send(t, "GET", at, WithKey(KeyA)); r.Status != http.StatusNotFound || !bytes.Contains(r.Body, []byte("World not found")) {
		t.Errorf("at the bound: %d %s, want the backend's 404", r.Status, Clip(r.Body))
	}
	be.WantSeen(t, "at the bound", at)

	// Caddy reads at most 16 KiB of request head (max_header_size) and a
	// little more: 16 000 characters of key or path fit.
	huge := strings.Repeat("k", 16_000)
	for _, target := range []string{"/api/v1/bans", "/api/v1/nothing"} {
		WantNotFound(t, Send(t, "GET", target, WithKey(huge)), target)
	}
	for _, target := range []string{"/api/v1/worlds/" + huge, "/api/v1/nothing/" + huge} {
		WantNotFound(t, Send(t, "GET", target), target)
	}
	be.WantSeen(t, "huge keys and parameters")
}

// TestQueryKeyNeverLogged sends keys in the query in the spellings that Caddy's
// log filter (request>uri query, delete or replace key) reads differently from
// the gateway: a '#' in an absolute-form or origin-form target, ';'
// separators, bad %-escapes. Each is a 400 before the key is read, left out
// of the access log (Caddy would write its target as it came); ordinary
// queries still work and are logged; and no line of the access log holds the
// key.
func TestQueryKeyNeverLogged(t *testing.T) {
	abs := "http://" + GatewayAddr
	refused := []string{
		abs + "/api/v1/bans?x=#&key=" + KeyA,
		"/api/v1/bans?x=#&key=" + KeyA,
		abs + "/api/v1/bans?x=#%zz&key=" + KeyA,
		abs + "/api/v1/worlds/world#?key=" + KeyA,
		abs + "/api/v1/bans?key=" + KeyA + "#",
		"/api/v1/bans?x=1;key=" + KeyA,
		"/api/v1/bans?key=" + KeyA + ";x=1",
		"/api/v1/bans?x=%zz&key=" + KeyA,
		"/api/v1/bans?key=" + KeyA + "&x=%",
		"/api/v1/nothing?x=#&key=" + KeyA,
		"/api/v1/worlds/a#b?key=" + KeyA,
		"/api/v1/bans?x=%2&key=" + KeyA,
		"/api/v1/bans?k%6=1&key=" + KeyA,
		"/api/v1/status?x=%G1",
	}
	// A custom station's query reaches the backend but for the key (a
	// built-in endpoint's, only what it reads).
	const votes = "/api/v1/custom/votes"
	served := map[string]string{ // target: what the backend gets
		votes + "?key=" + KeyA:                     votes,
		abs + votes + "?n=1&key=" + KeyA:           votes + "?n=1",
		votes + "?k%65y=" + KeyA + "&n=%41":        votes + "?n=%41",
		votes + "?KEY=x&key=" + KeyA + "&q=a+b%2F": votes + "?KEY=x&q=a+b%2F",
	}
	for _, action := range []string{"delete key", "replace key REDACTED"} {
		t.Run(action, func(t *testing.T) {
			be := NewBackend(t)
			accessLog := filepath.Join(t.TempDir(), "access.log")
			Gateway{
				Upstream:   be.Addr(),
				Statusgate: []string{"key " + KeyA, "allow_query_key", "enable custom/votes"},
				Site: []string{"log {\n\t\toutput file " + accessLog + "\n\t\tformat filter {\n\t\t\t" +
					"request>headers>X-Api-Key delete\n\t\t\trequest>uri query {\n\t\t\t\t" + action + "\n\t\t\t}\n\t\t}\n\t}"},
			}.Start(t)

			for _, target := range refused {
				WantError(t, Send(t, "GET", target), http.StatusBadRequest, DecodedPath(t, target))
			}
			be.WantSeen(t, "refused")
			for target, upstream := range served {
				WantBackendBytes(t, Send(t, "GET", target), votes)
				be.WantSeen(t, target, upstream)
			}

			// The refusals came first: once the served requests are logged, so
			// would they be.
			n := len(served)
			var log []byte
			for deadline := time.Now().Add(Patience); ; time.Sleep(50 * time.Millisecond) {
				log, _ = os.ReadFile(accessLog)
				if bytes.Count(log, []byte(`"msg":"handled request"`)) >= n || time.Now().After(deadline) {
					break
				}
			}
			statuses := map[int]int{}
			sc := bufio.NewScanner(bytes.NewReader(log))
			for sc.Scan() {
				var e logEntry
				if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
					t.Fatalf("access log line %s: %v", sc.Bytes(), err)
				}
				statuses[e.Status]++
			}
			if len(statuses) != 1 || statuses[200] != len(served) {
				t.Errorf("logged statuses %v, want %d × 200 only", statuses, len(served))
			}
			if bytes.Contains(log, []byte(KeyA)) {
				for _, line := range bytes.Split(log, []byte("\n")) {
					if bytes.Contains(line, []byte(KeyA)) {
						var e logEntry
						_ = json.Unmarshal(line, &e)
						t.Errorf("the access log holds the key: %d %s", e.Status, e.Request.URI)
					}
				}
			}
			// The preflight is the same for every target, '#' or not (after
			// the log's count: it is logged).
			if r := Send(t, "OPTIONS", "/api/v1/bans?x=#"); r.Status != http.StatusNoContent {
				t.Errorf("a preflight with '#': %d %s, want 204", r.Status, r.Body)
			}
		})
	}
}

// TestNoRequestBodyUpstream writes GET and HEAD requests with bodies by hand:
// chunked with trailers that name a key and real-IP headers (declared in a
// Trailer header or not), and a body with a length. The backend gets none of
// it: no body, no trailers, no length, no Transfer-Encoding (the backend's
// invariants check every request of every test for the same).
func TestNoRequestBodyUpstream(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be)
	trailers := "X-API-Key: " + KeyB + "\r\nX-Real-IP: 203.0.113.9\r\nCF-Connecting-IP: 203.0.113.9\r\nUpgrade: websocket\r\n"
	declared := "Trailer: X-API-Key, X-Real-IP, CF-Connecting-IP, Upgrade\r\n"
	for _, c := range []struct {
		name, method, target, head, body string
	}{
		{"declared trailers, keyed", "GET", "/api/v1/server", WithKey(KeyA) + "\r\n" + declared + "Transfer-Encoding: chunked\r\n", "5\r\nhello\r\n0\r\n" + trailers + "\r\n"},
		{"undeclared trailers, filtered", "GET", "/api/v1/status", "Transfer-Encoding: chunked\r\n", "0\r\n" + trailers + "\r\n"},
		{"declared trailers, HEAD", "HEAD", "/api/v1/status", declared + "Transfer-Encoding: chunked\r\n", "3\r\nabc\r\n0\r\n" + trailers + "\r\n"},
		{"a body with a length", "GET", "/api/v1/server", WithKey(KeyA) + "\r\nContent-Length: 5\r\n", "hello"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := SendRaw(t, c.method, c.method+" "+c.target+" HTTP/1.1\r\nHost: "+GatewayAddr+"\r\n"+c.head+"Connection: close\r\n\r\n"+c.body)
			if r.Err != nil || r.Status != http.StatusOK {
				t.Errorf("%d %s (err %v), want 200", r.Status, Clip(r.Body), r.Err)
			}
			for _, s := range be.WantSeen(t, c.name, c.target) {
				if len(s.Body) > 0 || len(s.Trailer) > 0 || s.ContentLength != 0 || len(s.TransferEncoding) > 0 {
					t.Errorf("the backend got the body %q, trailers %v, length %d, transfer encoding %q",
						s.Body, s.Trailer, s.ContentLength, s.TransferEncoding)
				}
				for _, h := range []string{"Trailer", "Te", "Content-Length", "Transfer-Encoding"} {
					if v, ok := s.Header[h]; ok && !(h == "Te" && v[0] == "trailers") {
						t.Errorf("the backend got %s: %q", h, v)
					}
				}
			}
		})
	}
}
