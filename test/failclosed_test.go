package test

import (
	"bytes"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// slowBackendTimeout makes reverse_proxy give up on the slow backend.
var slowBackendTimeout = []string{"response_header_timeout 200ms"}

// closedPort returns an address nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestFailClosed switches the backend into each failure and checks that an
// anonymous caller of a public endpoint (whose response is filtered) gets the
// gateway's 502 or 504 envelope, or a cut connection once the body is under
// way, and never a protected byte; and what a keyed caller, whose bytes are not
// parsed, gets instead.
func TestFailClosed(t *testing.T) {
	be := newBackend(t)
	gateway{
		upstream: be.addr(), statusgate: []string{"key " + keyA}, transport: slowBackendTimeout,
		site: []string{"header Strict-Transport-Security max-age=63072000"},
	}.start(t)
	anon := "/api/v1/player/" + alex
	keyed := "/api/v1/server"

	for _, c := range []struct {
		name   string
		mode   misbehaviour
		status int                            // for the anonymous caller
		keyed  func(t *testing.T, r response) // what the keyed caller gets
	}{
		{"HTML", sendHTML, 502, func(t *testing.T, r response) {
			if r.Status != 200 || !strings.HasPrefix(r.Header.Get("Content-Type"), "text/html") || !bytes.HasPrefix(r.Body, []byte("<!doctype html>")) {
				t.Errorf("keyed HTML: %d %q %s", r.Status, r.Header.Get("Content-Type"), r.Body)
			}
		}},
		{"gzip", sendGzip, 502, func(t *testing.T, r response) {
			if r.Status != 200 || r.Header.Get("Content-Encoding") != "gzip" {
				t.Errorf("keyed gzip: %d, Content-Encoding %q", r.Status, r.Header.Get("Content-Encoding"))
				return
			}
			r.Body = gunzip(t, r.Body)
			wantBackendBytes(t, r, keyed)
		}},
		{"truncated JSON", sendTruncated, 502, func(t *testing.T, r response) {
			wantUntouched(t, r, "keyed truncated", backendBody(keyed)[:len(backendBody(keyed))/2])
		}},
		{"connection closed mid-body", sendCutShort, 502, func(t *testing.T, r response) {
			// The answer is read whole before the client gets a byte, so a
			// keyed caller too gets a clean 502 instead of a cut.
			wantError(t, r, http.StatusBadGateway, keyed)
		}},
		{"200k deep", sendDeep, 502, func(t *testing.T, r response) {
			if r.Status != 200 || r.Err != nil || len(r.Body) != len(`{"ok":true,"data":`)+200_000 {
				t.Errorf("keyed deep: %d, %d bytes, err %v", r.Status, len(r.Body), r.Err)
			}
		}},
		{"slow", sendSlow, 504, func(t *testing.T, r response) {
			wantError(t, r, http.StatusGatewayTimeout, keyed)
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			be.misbehave(c.mode)
			defer be.misbehave(behave)
			r := send(t, "GET", anon, "Accept-Encoding: gzip")
			wantError(t, r, c.status, anon)
			if r.Header.Get("Strict-Transport-Security") != "max-age=63072000" {
				t.Errorf("the gateway's %d lost the site's header: %v", r.Status, r.Header)
			}
			if seen := be.wantSeen(t, c.name+" anonymous", anon); len(seen) == 1 && seen[0].Header.Get("Accept-Encoding") != "identity" {
				t.Errorf("filtered call asked for Accept-Encoding %q", seen[0].Header.Get("Accept-Encoding"))
			}
			c.keyed(t, send(t, "GET", keyed, withKey(keyA), "Accept-Encoding: gzip"))
			be.wantSeen(t, c.name+" keyed", keyed)
		})
	}

	t.Run("invalid JSON after 100 KB is a 502: it is within the hold-back", func(t *testing.T) {
		be.misbehave(sendEarlyError)
		defer be.misbehave(behave)
		wantError(t, send(t, "GET", anon), http.StatusBadGateway, anon)
		be.wantSeen(t, "early error", anon)
	})

	t.Run("invalid JSON after 1 MB is a 502 within max_response", func(t *testing.T) {
		be.misbehave(sendLateError)
		defer be.misbehave(behave)
		wantError(t, send(t, "GET", anon), http.StatusBadGateway, anon)
		be.wantSeen(t, "late error held", anon)
	})

	t.Run("invalid JSON past max_response cuts the connection", func(t *testing.T) {
		startDefault(t, be, "max_response 256KiB")
		be.misbehave(sendLateError)
		defer be.misbehave(behave)
		r := send(t, "GET", anon)
		if r.Status != 200 || !r.Chunked || !errors.Is(r.Err, io.ErrUnexpectedEOF) {
			t.Errorf("late error: status %d, chunked %v, err %v; want 200, chunked, unexpected EOF", r.Status, r.Chunked, r.Err)
		}
		if len(r.Body) < 256<<10 || !bytes.HasPrefix(r.Body, []byte(`{"ok":true,"data":{"uuid":"`+alex+`","sessions":[{"server":"s0","ticks":0},`)) {
			t.Errorf("late error: %d bytes before the cut, want the filtered start of the document: %s", len(r.Body), clip(r.Body))
		}
		for _, raw := range []string{discordID, `"op":`, `"discord":`} {
			if bytes.Contains(r.Body, []byte(raw)) {
				t.Errorf("late error: %s was sent", raw)
			}
		}
		be.wantSeen(t, "late error", anon)
	})

	t.Run("closed port", func(t *testing.T) {
		gateway{upstream: closedPort(t), statusgate: []string{"key " + keyA}}.start(t)
		wantError(t, send(t, "GET", anon), http.StatusBadGateway, anon)
		wantError(t, send(t, "GET", keyed, withKey(keyA)), http.StatusBadGateway, keyed)
		if r := send(t, "HEAD", keyed, withKey(keyA)); r.Status != http.StatusBadGateway || len(r.Body) != 0 || len(r.Trailing) != 0 {
			t.Errorf("HEAD, closed port: %d, body %q %q; want 502 without a body", r.Status, r.Body, r.Trailing)
		}
		be.wantSeen(t, "closed port") // the recording backend is not the upstream now
	})
}

// TestLogsKeepKeysOut sends good and bad keys, in the header and the query,
// through every kind of outcome, backend failures included, with Caddy's debug
// log and an access log (with the filter docs/operating.md gives) written to files,
// and checks that no key appears in either.
func TestLogsKeepKeysOut(t *testing.T) {
	be := newBackend(t)
	dir := t.TempDir()
	debugLog, accessLog := filepath.Join(dir, "caddy.log"), filepath.Join(dir, "access.log")
	g := gateway{
		upstream:   be.addr(),
		statusgate: []string{"key " + keyA, "allow_query_key"},
		transport:  slowBackendTimeout,
		global:     []string{"debug", "log {\n\t\toutput file " + debugLog + "\n\t\tlevel DEBUG\n\t}"},
		site: []string{`log {
		output file ` + accessLog + `
		format filter {
			request>headers>X-Api-Key delete
			request>uri query {
				delete key
			}
		}
	}`},
	}
	g.start(t)

	// sendAll sends every combination of key header and key query to each
	// target, all at once (the slow backend takes 200 ms a request).
	requests := 0
	sendAll := func(targets ...string) {
		var wg sync.WaitGroup
		for _, target := range targets {
			for _, h := range [][]string{nil, {withKey(keyA)}, {withKey(badKey)}} {
				for _, q := range []string{"", "?key=" + keyA, "?key=" + badKey, "?k%65y=" + keyA + "&x=1"} {
					requests++
					wg.Go(func() { send(t, "GET", target+q, h...) })
				}
			}
		}
		wg.Wait()
	}
	player := "/api/v1/player/" + alex
	sendAll(player, "/api/v1/server", "/api/v1/nothing", "/api/v1", "/")
	for _, m := range []string{"HEAD", "POST", "OPTIONS"} {
		send(t, m, "/api/v1/server?key="+keyA, withKey(keyA))
		requests++
	}
	for _, m := range []misbehaviour{sendSlow, sendHTML, sendEarlyError, sendLateError, sendCutShort, sendGzip} {
		be.misbehave(m)
		sendAll(player, "/api/v1/server")
	}
	be.misbehave(behave)
	g.upstream = closedPort(t)
	g.start(t)
	sendAll(player, "/api/v1/server")
	be.take()

	// Access log entries are written after the response; wait for all of them.
	var debug, access []byte
	for deadline := time.Now().Add(patience); ; {
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
		for _, k := range []string{keyA, badKey} {
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
	be := newBackend(t)
	startDefault(t, be)
	anon := "/api/v1/player/" + alex
	keyed := "/api/v1/server"
	for _, c := range []struct {
		name string
		mode misbehaviour
		want []string // the keyed caller's Content-Type
	}{
		{"utf-7", sendUTF7, []string{"application/json; charset=utf-7"}},
		{"two types", sendTwoTypes, []string{"application/json; charset=utf-8", "text/html"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			be.misbehave(c.mode)
			defer be.misbehave(behave)
			wantError(t, send(t, "GET", anon), http.StatusBadGateway, anon)
			be.wantSeen(t, c.name+" anonymous", anon)
			r := send(t, "GET", keyed, withKey(keyA))
			if r.Status != 200 || !slices.Equal(r.Header.Values("Content-Type"), c.want) || !bytes.Equal(r.Body, backendBody(keyed)) {
				t.Errorf("keyed: %d, Content-Type %q, body %s", r.Status, r.Header.Values("Content-Type"), clip(r.Body))
			}
			be.wantSeen(t, c.name+" keyed", keyed)
		})
	}
	t.Run("bare application/json", func(t *testing.T) {
		be.misbehave(sendBareJSON)
		defer be.misbehave(behave)
		r := send(t, "GET", anon)
		if r.Status != 200 || r.Header.Get("Content-Type") != "application/json" || !slices.Equal(r.Header.Values("X-Content-Type-Options"), []string{"nosniff"}) {
			t.Errorf("filtered: %d, Content-Type %q, X-Content-Type-Options %q", r.Status, r.Header.Get("Content-Type"), r.Header.Values("X-Content-Type-Options"))
		}
		if names := memberNames(t, r.Body); names["op"] || names["discord"] {
			t.Errorf("protected members sent: %s", clip(r.Body))
		}
		be.wantSeen(t, "bare", anon)
	})
}
