package gateway

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// slowBackendTimeout makes reverse_proxy give up on the slow backend.
var slowBackendTimeout = []string{"response_header_timeout 200ms"}

// TestFailClosed switches the backend into each failure and checks that an
// anonymous caller of a public endpoint (whose response is filtered) gets the
// gateway's 502 or 504 envelope, or a cut connection once the body is under
// way, and never a protected byte; and what a keyed caller, whose bytes are not
// parsed, gets instead.
func TestFailClosed(t *testing.T) {
	be := NewBackend(t)
	Gateway{
		Upstream: be.Addr(), Statusgate: []string{"key " + KeyA}, Transport: slowBackendTimeout,
		Site: []string{"header Strict-Transport-Security max-age=63072000"},
	}.Start(t)
	anon := "/api/v1/player/" + Alex
	keyed := "/api/v1/server"

	for _, c := range []struct {
		name   string
		mode   Misbehaviour
		status int                            // for the anonymous caller
		keyed  func(t *testing.T, r Response) // what the keyed caller gets
	}{
		{"HTML", SendHTML, 502, func(t *testing.T, r Response) {
			if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || !bytes.HasPrefix(r.Body, []byte("<!doctype html>")) {
				t.Errorf("keyed HTML: %d %q %s", r.Status, r.Header.Get("Content-Type"), r.Body)
			}
		}},
		{"gzip", SendGzip, 502, func(t *testing.T, r Response) {
			if r.Status != 200 || r.Header.Get("Content-Encoding") != "gzip" {
				t.Errorf("keyed gzip: %d, Content-Encoding %q", r.Status, r.Header.Get("Content-Encoding"))
				return
			}
			r.Body = Gunzip(t, r.Body)
			WantBackendBytes(t, r, keyed)
		}},
		{"truncated JSON", SendTruncated, 502, func(t *testing.T, r Response) {
			WantUntouched(t, r, "keyed truncated", BackendBody(keyed)[:len(BackendBody(keyed))/2])
		}},
		{"connection closed mid-body", SendCutShort, 502, func(t *testing.T, r Response) {
			// The answer is read whole before the client gets a byte, so a
			// keyed caller too gets a clean 502 instead of a cut.
			WantError(t, r, http.StatusBadGateway, keyed)
		}},
		{"200k deep", SendDeep, 502, func(t *testing.T, r Response) {
			if r.Status != 200 || r.Err != nil || len(r.Body) != len(`{"ok":true,"data":`)+200_000 {
				t.Errorf("keyed deep: %d, %d bytes, err %v", r.Status, len(r.Body), r.Err)
			}
		}},
		{"slow", SendSlow, 504, func(t *testing.T, r Response) {
			WantError(t, r, http.StatusGatewayTimeout, keyed)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			be.Misbehave(c.mode)
			defer be.Misbehave(Behave)
			r := Send(t, "GET", anon, "Accept-Encoding: gzip")
			WantError(t, r, c.status, anon)
			if r.Header.Get("Strict-Transport-Security") != "max-age=63072000" {
				t.Errorf("the gateway's %d lost the site's header: %v", r.Status, r.Header)
			}
			if seen := be.WantSeen(t, c.name+" anonymous", anon); len(seen) == 1 && seen[0].Header.Get("Accept-Encoding") != "identity" {
				t.Errorf("filtered call asked for Accept-Encoding %q", seen[0].Header.Get("Accept-Encoding"))
			}
			c.keyed(t, Send(t, "GET", keyed, WithKey(KeyA), "Accept-Encoding: gzip"))
			be.WantSeen(t, c.name+" keyed", keyed)
		})
	}

	t.Run("invalid JSON after 100 KB is a 502: it is within the hold-back", func(t *testing.T) {
		be.Misbehave(SendEarlyError)
		defer be.Misbehave(Behave)
		WantError(t, Send(t, "GET", anon), http.StatusBadGateway, anon)
		be.WantSeen(t, "early error", anon)
	})

	t.Run("invalid JSON after 1 MB is a 502 within max_response", func(t *testing.T) {
		be.Misbehave(SendLateError)
		defer be.Misbehave(Behave)
		WantError(t, Send(t, "GET", anon), http.StatusBadGateway, anon)
		be.WantSeen(t, "late error held", anon)
	})

	t.Run("invalid JSON past max_response cuts the connection", func(t *testing.T) {
		StartDefault(t, be, "max_response 256KiB")
		be.Misbehave(SendLateError)
		defer be.Misbehave(Behave)
		r := Send(t, "GET", anon)
		if r.Status != 200 || !r.Chunked || !errors.Is(r.Err, io.ErrUnexpectedEOF) {
			t.Errorf("late error: status %d, chunked %v, err %v; want 200, chunked, unexpected EOF", r.Status, r.Chunked, r.Err)
		}
		if len(r.Body) < 256<<10 || !bytes.HasPrefix(r.Body, []byte(`{"ok":true,"data":{"uuid":"`+Alex+`","sessions":[{"server":"s0","ticks":0},`)) {
			t.Errorf("late error: %d bytes before the cut, want the filtered start of the document: %s", len(r.Body), Clip(r.Body))
		}
		for _, raw := range []string{DiscordID, `"op":`, `"discord":`} {
			if bytes.Contains(r.Body, []byte(raw)) {
				t.Errorf("late error: %s was sent", raw)
			}
		}
		be.WantSeen(t, "late error", anon)
	})

	t.Run("closed port", func(t *testing.T) {
		Gateway{Upstream: ClosedPort(t), Statusgate: []string{"key " + KeyA}}.Start(t)
		WantError(t, Send(t, "GET", anon), http.StatusBadGateway, anon)
		WantError(t, Send(t, "GET", keyed, WithKey(KeyA)), http.StatusBadGateway, keyed)
		if r := Send(t, "HEAD", keyed, WithKey(KeyA)); r.Status != http.StatusBadGateway || len(r.Body) != 0 || len(r.Trailing) != 0 {
			t.Errorf("HEAD, closed port: %d, body %q %q; want 502 without a body", r.Status, r.Body, r.Trailing)
		}
		be.WantSeen(t, "closed port") // the recording backend is not the upstream now
	})
}

// TestLogsKeepKeysOut sends good and bad keys, in the header and the query,
// through every kind of outcome, backend failures included, with Caddy's debug
// log and an access log (with the filter docs/operating.md gives) written to files,
// and checks that no key appears in either.
func TestLogsKeepKeysOut(t *testing.T) {
	be := NewBackend(t)
	dir := t.TempDir()
	debugLog, accessLog := filepath.Join(dir, "caddy.log"), filepath.Join(dir, "access.log")
	g := Gateway{
		Upstream:   be.Addr(),
		Statusgate: []string{"key " + KeyA, "allow_query_key"},
		Transport:  slowBackendTimeout,
		Global:     []string{"debug", "log {\n\t\toutput file " + debugLog + "\n\t\tlevel DEBUG\n\t}"},
		Site: []string{`log {
		output file ` + accessLog + `
		format filter {
			request>headers>X-Api-Key delete
			request>uri query {
				delete key
			}
		}
	}`},
	}
	g.Start(t)

	// sendAll sends every combination of key header and key query to each
	// target, all at once (the slow backend takes 200 ms a request).
	requests := 0
	sendAll := func(targets ...string) {
		var wg sync.WaitGroup
		for _, target := range targets {
			for _, h := range [][]string{nil, {WithKey(KeyA)}, {WithKey(BadKey)}} {
				for _, q := range []string{"", "?key=" + KeyA, "?key=" + BadKey, "?k%65y=" + KeyA + "&x=1"} {
					requests++
					wg.Go(func() { Send(t, "GET", target+q, h...) })
				}
			}
		}
		wg.Wait()
	}
	player := "/api/v1/player/" + Alex
	sendAll(player, "/api/v1/server", "/api/v1/nothing", "/api/v1", "/")
	for _, m := range []string{"HEAD", "POST", "OPTIONS"} {
		Send(t, m, "/api/v1/server?key="+KeyA, WithKey(KeyA))
		requests++
	}
	for _, m := range []Misbehaviour{SendSlow, SendHTML, SendEarlyError, SendLateError, SendCutShort, SendGzip} {
		be.Misbehave(m)
		sendAll(player, "/api/v1/server")
	}
	be.Misbehave(Behave)
	g.Upstream = ClosedPort(t)
	g.Start(t)
	sendAll(player, "/api/v1/server")
	be.Take()

	// Access log entries are written after the response; wait for all of them.
	var debug, access []byte
	for deadline := time.Now().Add(Patience); ; {
		debug, _ = os.ReadFile(debugLog)
		access, _ = os.ReadFile(accessLog)
		if bytes.Count(access, []byte(`"msg":"handled request"`)) >= requests || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := bytes.Count(access, []byte(`"msg":"handled request"`)); n != requests {
		t.Errorf("access log has %d entries, want %d", n, requests)
	}
	if !bytes.Contains(debug, []byte(`"msg":"backend response refused"`)) || !bytes.Contains(debug, []byte(`"msg":"upstream roundtrip"`)) {
		t.Errorf("the debug log lacks the gateway's and reverse_proxy's entries (%d bytes)", len(debug))
	}
	if !bytes.Contains(access, []byte(`x=1`)) {
		t.Errorf("the access log lost the rest of the query")
	}
	for name, log := range map[string][]byte{"debug log": debug, "access log": access} {
		for _, k := range []string{KeyA, BadKey} {
			if n := bytes.Count(log, []byte(k)); n > 0 {
				t.Errorf("the %s has the key %q %d times, e.g. %s", name, k, n, lineWith(log, k))
			}
		}
	}
	for _, line := range bytes.Split(debug, []byte("\n")) {
		if bytes.Contains(line, []byte(`"logger":"http.handlers.statusgate"`)) &&
			(bytes.Contains(line, []byte(`"headers"`)) || bytes.Contains(line, []byte(`"uri"`))) {
			t.Errorf("the gateway logged a request: %s", line)
		}
	}
}

// lineWith is the first line of log that contains s.
func lineWith(log []byte, s string) []byte {
	for _, line := range bytes.Split(log, []byte("\n")) {
		if bytes.Contains(line, []byte(s)) {
			return line
		}
	}
	return nil
}

// TestContentTypeFailsClosed: the field layer reads one Content-Type,
// application/json in UTF-8 (or without a charset). A charset it cannot read,
// or a second Content-Type beside the first, is the gateway's 502 for a
// filtered answer, and the keyed caller, whose bytes are not read, gets them
// as sent. A filtered answer says nosniff even when the backend does not.
func TestContentTypeFailsClosed(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be)
	anon := "/api/v1/player/" + Alex
	keyed := "/api/v1/server"
	for _, c := range []struct {
		name string
		mode Misbehaviour
		want []string // the keyed caller's Content-Type
	}{
		{"utf-7", SendUTF7, []string{"application/json; charset=utf-7"}},
		{"two types", SendTwoTypes, []string{"application/json; charset=utf-8", "text/html"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			be.Misbehave(c.mode)
			defer be.Misbehave(Behave)
			WantError(t, Send(t, "GET", anon), http.StatusBadGateway, anon)
			be.WantSeen(t, c.name+" anonymous", anon)
			r := Send(t, "GET", keyed, WithKey(KeyA))
			if r.Status != 200 || !slices.Equal(r.Header.Values("Content-Type"), c.want) || !bytes.Equal(r.Body, BackendBody(keyed)) {
				t.Errorf("keyed: %d, Content-Type %q, body %s", r.Status, r.Header.Values("Content-Type"), Clip(r.Body))
			}
			be.WantSeen(t, c.name+" keyed", keyed)
		})
	}
	t.Run("bare application/json", func(t *testing.T) {
		be.Misbehave(SendBareJSON)
		defer be.Misbehave(Behave)
		r := Send(t, "GET", anon)
		if r.Status != 200 || r.Header.Get("Content-Type") != "application/json" || !slices.Equal(r.Header.Values("X-Content-Type-Options"), []string{"nosniff"}) {
			t.Errorf("filtered: %d, Content-Type %q, X-Content-Type-Options %q", r.Status, r.Header.Get("Content-Type"), r.Header.Values("X-Content-Type-Options"))
		}
		if names := MemberNames(t, r.Body); names["op"] || names["discord"] {
			t.Errorf("protected members sent: %s", Clip(r.Body))
		}
		be.WantSeen(t, "bare", anon)
	})
}
