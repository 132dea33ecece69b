package gateway

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// generate makes a key as `caddy statusgate-key --name <name>` does.
func generate(t *testing.T, name string) apikey.Generated {
	t.Helper()
	g, err := apikey.Generate(nil, name)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestGeneratedKeys configures keys the way the generator prints them (the
// digest line, and the line that reads the secret from the environment)
// next to a plain one, and checks that each secret opens a protected
// endpoint while the digest itself, a wrong secret and no key do not.
func TestGeneratedKeys(t *testing.T) {
	be := NewBackend(t)
	bot, web := generate(t, "discord-bot"), generate(t, "website")
	t.Setenv(web.EnvVar(), web.Secret)
	Gateway{Upstream: be.Addr(), Statusgate: []string{bot.CaddyfileLine(), web.CaddyfileEnvLine(), "key " + KeyA}}.Start(t)

	const server = "/api/v1/server"
	for _, secret := range []string{bot.Secret, web.Secret, KeyA} {
		WantBackendBytes(t, Send(t, "GET", server, WithKey(secret)), server)
	}
	seen := be.WantSeen(t, "generated keys", server, server, server)
	for _, s := range seen {
		if h := FmtHeader(s.Header); strings.Contains(h, bot.Secret) || strings.Contains(h, web.Secret) {
			t.Errorf("a secret reached the backend: %s", h)
		}
	}
	wrong := bot.Secret[:len(bot.Secret)-1] + "A"
	if wrong == bot.Secret {
		wrong = bot.Secret[:len(bot.Secret)-1] + "B"
	}
	for what, key := range map[string]string{
		"the digest":       bot.Digest,
		"the digest's hex": strings.TrimPrefix(bot.Digest, apikey.DigestPrefix),
		"a wrong secret":   wrong,
		"the env line":     "{env." + web.EnvVar() + "}",
	} {
		WantNotFound(t, Send(t, "GET", server, WithKey(key)), server)
		be.WantSeen(t, what)
	}
	WantNotFound(t, Send(t, "GET", server), server)
	be.WantSeen(t, "no key")
}

// logEntry is what the test reads of an access log line.
type logEntry struct {
	Msg     string `json:"msg"`
	Request struct {
		Method string `json:"method"`
		URI    string `json:"uri"`
	} `json:"request"`
	Status   int     `json:"status"`
	Endpoint string  `json:"statusgate_endpoint"`
	Key      string  `json:"statusgate_key"`
	Client   string  `json:"statusgate_client"`
	Outcome  string  `json:"statusgate_outcome"`
	Duration float64 `json:"duration"` // seconds
}

// TestAccessLogPlaceholders writes an access log with the four placeholders
// appended (log_append) and the filter of docs/operating.md, and Caddy's debug log, to
// files; sends one request of each kind, keys in the header and the query;
// and checks each request's fields, and that neither log holds a secret.
func TestAccessLogPlaceholders(t *testing.T) {
	be := NewBackend(t)
	bot := generate(t, "discord-bot")
	dir := t.TempDir()
	debugLog, accessLog := filepath.Join(dir, "caddy.log"), filepath.Join(dir, "access.log")
	Gateway{
		Upstream:   be.Addr(),
		Statusgate: []string{bot.CaddyfileLine(), "key " + KeyA, "allow_query_key", "stream_lifetime 500ms"},
		Global:     []string{"debug", "log {\n\t\toutput file " + debugLog + "\n\t\tlevel DEBUG\n\t}"},
		Site: []string{
			"log {\n\t\toutput file " + accessLog + "\n\t\tformat filter {\n\t\t\trequest>headers>X-Api-Key delete\n\t\t\trequest>uri query {\n\t\t\t\tdelete key\n\t\t\t}\n\t\t}\n\t}",
			"log_append statusgate_endpoint {http.statusgate.endpoint}",
			"log_append statusgate_key {http.statusgate.key}",
			"log_append statusgate_client {http.statusgate.client}",
			"log_append statusgate_outcome {http.statusgate.outcome}",
		},
	}.Start(t)

	const ip = "127.0.0.1"
	player := "/api/v1/player/" + Alex
	type want struct{ endpoint, key, client, outcome string }
	cases := []struct {
		method, target string
		header         []string
		want           want
	}{
		{"GET", "/api/v1/server?n=1", []string{WithKey(bot.Secret)}, want{"server", "discord-bot", "discord-bot", "served"}},
		{"GET", "/api/v1/status?n=2", []string{WithKey(KeyA)}, want{"status", "key-2", "key-2", "served"}},
		{"GET", "/api/v1/server?n=3&key=" + bot.Secret, nil, want{"server", "discord-bot", "discord-bot", "served"}},
		{"GET", player + "?n=4", nil, want{"player", "", ip, "filtered"}},
		{"GET", "/api/v1/server?n=5", []string{WithKey(BadKey)}, want{"server", "", ip, "refused"}},
		{"GET", "/api/v1/nothing?n=6", []string{WithKey(bot.Secret)}, want{"", "", ip, "not_found"}},
		{"OPTIONS", "/api/v1/server?n=7", nil, want{"", "", ip, "preflight"}},
		{"POST", "/api/v1/server?n=8", []string{WithKey(KeyA)}, want{"server", "key-2", "key-2", "method"}},
		{"GET", "/api/v1?n=9", nil, want{"index", "", ip, "index"}},
		// A live stream, logged once when it ends (its lifetime), with its
		// duration.
		{"GET", "/api/v1/status?n=11", []string{WithKey(KeyA), "Accept: text/event-stream"}, want{"status", "key-2", "key-2", "streamed"}},
		{"GET", player + "?n=10", nil, want{"player", "", ip, "backend_error"}},
	}
	for i, c := range cases {
		if i == len(cases)-1 {
			be.Misbehave(SendHTML)
		}
		Send(t, c.method, c.target, c.header...)
	}
	be.Misbehave(Behave)
	be.Take()

	var entries []logEntry
	var access, debug []byte
	for deadline := time.Now().Add(Patience); ; {
		access, _ = os.ReadFile(accessLog)
		if bytes.Count(access, []byte(`"msg":"handled request"`)) >= len(cases) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	debug, _ = os.ReadFile(debugLog)
	sc := bufio.NewScanner(bytes.NewReader(access))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e logEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("access log line %s: %v", sc.Bytes(), err)
		}
		// Caddy says NOP of a request no handler answered; statusgate,
		// which passes each trip through the handlers after it to its
		// backend, answers every one.
		if e.Msg != "handled request" {
			t.Errorf("access log entry %q for %s %s, want handled request", e.Msg, e.Request.Method, e.Request.URI)
		}
		entries = append(entries, e)
	}
	if len(entries) != len(cases) {
		t.Fatalf("%d access log entries, want %d", len(entries), len(cases))
	}
	nRE := regexp.MustCompile(`[?&]n=(\d+)`)
	for _, c := range cases {
		found := false
		for _, e := range entries {
			if e.Request.Method != c.method || nRE.FindString(e.Request.URI) != nRE.FindString(c.target) {
				continue
			}
			found = true
			got := want{e.Endpoint, e.Key, e.Client, e.Outcome}
			if got != c.want {
				t.Errorf("%s %s: logged %+v, want %+v", c.method, c.target, got, c.want)
			}
			if got.outcome == "streamed" && e.Duration < 0.45 {
				t.Errorf("%s %s: logged a duration of %gs, less than the stream's lifetime (500ms, less up to a tenth)", c.method, c.target, e.Duration)
			}
		}
		if !found {
			t.Errorf("%s %s: no access log entry", c.method, c.target)
		}
	}
	if !bytes.Contains(debug, []byte(`"level":"debug"`)) {
		t.Errorf("the debug log has no debug entries (%d bytes)", len(debug))
	}
	for name, log := range map[string][]byte{"debug log": debug, "access log": access} {
		for _, k := range []string{bot.Secret, bot.Digest, KeyA, BadKey} {
			if n := bytes.Count(log, []byte(k)); n > 0 {
				t.Errorf("the %s has the key %q %d times, e.g. %s", name, k, n, lineWith(log, k))
			}
		}
	}
}

// TestMetricsScrape sends a scripted mix of requests and scrapes Caddy's
// admin /metrics endpoint: every statusgate series is exact, none names a
// path or a secret, and the series exist for the configured values only.
func TestMetricsScrape(t *testing.T) {
	be := NewBackend(t)
	bot := generate(t, "discord-bot")
	Gateway{Upstream: be.Addr(), Statusgate: []string{bot.CaddyfileLine(), "key " + KeyA, "enable custom/votes"}}.Start(t)

	player, status := "/api/v1/player/"+Alex, "/api/v1/status"
	var playerOut, statusOut int
	for range 3 {
		statusOut += len(Send(t, "GET", status).Body)
	}
	for range 2 {
		Send(t, "GET", status, WithKey(bot.Secret))
	}
	Send(t, "GET", "/api/v1/custom/votes", WithKey(bot.Secret))
	Send(t, "GET", "/api/v1/server", WithKey(KeyA))
	Send(t, "GET", "/api/v1/server")
	Send(t, "GET", "/api/v1/server")
	Send(t, "GET", "/api/v1/server", WithKey(BadKey))
	Send(t, "GET", "/api/v1/server", WithKey(bot.Digest))
	r := Send(t, "GET", player)
	WantFiltered(t, r, player, PlayerFields...)
	playerOut = len(r.Body)
	Send(t, "POST", status)
	Send(t, "OPTIONS", "/api/v1/server")
	Send(t, "GET", "/api/v1/nothing")
	Send(t, "GET", "/api/v1/whitelist", WithKey(KeyA)) // disabled; the key counts all the same
	Send(t, "GET", "/api/v1/server?x=#")
	Send(t, "GET", "/favicon.ico")
	Send(t, "GET", "/api/v1")
	be.Misbehave(SendHTML)
	Send(t, "GET", player)
	be.Misbehave(Behave)
	be.Take()

	got, text := ScrapeAdmin(t)

	req := func(ep, outcome string) string {
		return fmt.Sprintf(`caddy_http_statusgate_requests_total{endpoint=%q,outcome=%q,server=""}`, ep, outcome)
	}
	want := map[string]float64{
		req("status", "filtered"):                                     3,
		req("status", "served"):                                       2,
		req("status", "method"):                                       1,
		req("custom/votes", "served"):                                 1,
		req("server", "served"):                                       1,
		req("server", "refused"):                                      4,
		req("player", "filtered"):                                     1,
		req("player", "backend_error"):                                1,
		req("index", "index"):                                         1,
		req("_other", "preflight"):                                    1,
		req("_other", "not_found"):                                    3,
		req("_other", "bad_request"):                                  1,
		`caddy_http_statusgate_key_requests_total{key="discord-bot"}`: 3,
		`caddy_http_statusgate_key_requests_total{key="key-2"}`:       2,
		`caddy_http_statusgate_unknown_key_requests_total`:            2,
		`caddy_http_statusgate_fields_removed_total{endpoint="player",field="op"}`:           1,
		`caddy_http_statusgate_fields_removed_total{endpoint="player",field="banned"}`:       1,
		`caddy_http_statusgate_fields_removed_total{endpoint="player",field="discord"}`:      1,
		`caddy_http_statusgate_fields_removed_total{endpoint="player",field="chatplatform"}`: 0,
		`caddy_http_statusgate_filter_in_bytes_total{endpoint="player"}`:                     float64(len(BackendBody(player))),
		`caddy_http_statusgate_filter_out_bytes_total{endpoint="player"}`:                    float64(playerOut),
		`caddy_http_statusgate_filter_in_bytes_total{endpoint="status"}`:                     float64(3 * len(BackendBody(status))),
		`caddy_http_statusgate_filter_out_bytes_total{endpoint="status"}`:                    float64(statusOut),
		`caddy_http_statusgate_backend_requests_in_flight{guard=""}`:                         0,
	}
	for k, v := range want {
		if g, ok := got[k]; !ok || g != v {
			t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
		}
	}
	// Everything not in want is a zero, pre-created series of a configured
	// value: the enabled endpoints (16 by default, custom/votes, and
	// _other) with every outcome, each enabled endpoint's filter bytes,
	// the server and worlds fields.
	for k, v := range got {
		if _, listed := want[k]; !listed && v != 0 {
			t.Errorf("%s = %v, want 0", k, v)
		}
	}
	var requests float64
	outcomes := map[string]bool{}
	endpoints := map[string]bool{}
	for k, v := range got {
		if rest, ok := strings.CutPrefix(k, "caddy_http_statusgate_requests_total{"); ok {
			requests += v
			var ep, o string
			if _, err := fmt.Sscanf(strings.NewReplacer(`endpoint="`, "", `",outcome="`, " ", `",server=""}`, "").Replace(rest), "%s %s", &ep, &o); err != nil {
				t.Fatalf("series %s: %v", k, err)
			}
			endpoints[ep], outcomes[o] = true, true
		}
	}
	if requests != 20 {
		t.Errorf("%v requests counted, want the 20 sent", requests)
	}
	// 15 built-ins enabled by default, custom/votes and _other.
	if len(outcomes) != 16 || len(endpoints) != 17 {
		t.Errorf("series for %d outcomes and %d endpoints (%v), want 16 and 17", len(outcomes), len(endpoints), endpoints)
	}
	for _, line := range strings.Split(text.String(), "\n") {
		if !strings.Contains(line, "statusgate") {
			continue
		}
		for _, bad := range []string{"whitelist", "network", "nothing", "favicon", bot.Digest[len(apikey.DigestPrefix):]} {
			if strings.Contains(line, bad) {
				t.Errorf("the scrape mentions %q: %s", bad, line)
			}
		}
	}
	for _, secret := range []string{bot.Secret, KeyA, BadKey} {
		if bytes.Contains(text.Bytes(), []byte(secret)) {
			t.Errorf("the scrape holds a secret: %s", lineWith(text.Bytes(), secret))
		}
	}
}

// TestGuardMetricsScrape runs a named guard with the defaults (coalescing
// and the micro-cache on) and scrapes what its units counted: four callers
// of a slow player record sharing one trip, a cached status found twice. A
// reload that keeps the guard (a key added) shows the same counts, once.
func TestGuardMetricsScrape(t *testing.T) {
	be := NewBackend(t)
	g := Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "guard scraped"}, Shared: true}
	g.Start(t)
	player, status := "/api/v1/player/"+Alex, "/api/v1/status"
	for _, r := range HeldTogether(t, be, 4, func(int) Response { return Send(t, "GET", player) }) {
		WantFiltered(t, r, player, PlayerFields...)
	}
	for range 3 {
		WantFiltered(t, Send(t, "GET", status), status)
	}
	if seen := be.Take(); len(seen) != 2 {
		t.Fatalf("%d trips to the backend, want 2 (one player, one status)", len(seen))
	}

	series := func(family, labels string) string {
		return fmt.Sprintf(`caddy_http_statusgate_%s{guard="scraped"%s}`, family, labels)
	}
	// Only the cached endpoint looks in the cache: status's first miss and
	// two hits; player, which is not cached, never looks.
	want := map[string]float64{
		series("cache_lookups_total", `,result="hit"`):                                     2,
		series("cache_lookups_total", `,result="stale"`):                                   0,
		series("cache_lookups_total", `,result="miss"`):                                    1,
		series("cache_evictions_total", ""):                                                0,
		series("cache_entries", ""):                                                        1,
		series("coalesce_requests_total", `,role="led"`):                                   2,
		series("coalesce_requests_total", `,role="shared"`):                                3,
		series("coalesce_requests_total", `,role="alone"`):                                 0,
		series("coalesce_requests_total", `,role="abandoned"`):                             0,
		series("coalesce_unshared_total", `,reason="released"`):                            0,
		series("coalesce_unshared_total", `,reason="unshareable"`):                         0,
		series("coalesce_in_flight", ""):                                                   0,
		series("coalesce_waiting", ""):                                                     0,
		series("backend_requests_in_flight", ""):                                           0,
		series("held_bytes", ""):                                                           0,
		`caddy_http_statusgate_backend_requests_queued{class="anonymous",guard="scraped"}`: 0,
		`caddy_http_statusgate_backend_requests_queued{class="keyed",guard="scraped"}`:     0,
	}
	check := func(what string) {
		t.Helper()
		got, _ := ScrapeAdmin(t)
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s: %s = %v (present %v), want %v", what, k, g, ok, v)
			}
		}
		if got[series("cache_bytes", "")] <= 0 {
			t.Errorf("%s: the cache holds %v bytes", what, got[series("cache_bytes", "")])
		}
		for k := range got {
			if strings.Contains(k, "guard=") && !strings.Contains(k, `guard="scraped"`) {
				t.Errorf("%s: a series of another guard: %s", what, k)
			}
		}
	}
	check("first config")
	g.Statusgate = append(g.Statusgate, "key "+KeyB)
	g.Start(t)
	check("reloaded")
}

// TestClientGoneLogged: clients that hang up while their request waits, at
// the backend (whole, or through the field layer) or in the admission queue,
// are each logged once with the same status, 499 as reverse_proxy logs it,
// and the outcome client_gone. One that left at the backend keeps its slot
// until the backend has answered (docs/backend-protection.md); one that left
// the queue is gone at once.
func TestClientGoneLogged(t *testing.T) {
	be := NewBackend(t)
	accessLog := filepath.Join(t.TempDir(), "access.log")
	Gateway{
		Upstream:   be.Addr(),
		Statusgate: []string{"key " + KeyA, "max_in_flight 1", "queue 4 1m", "enable custom/votes", "require_key custom/votes off"},
		Site: []string{
			"log {\n\t\toutput file " + accessLog + "\n\t}",
			"log_append statusgate_outcome {http.statusgate.outcome}",
		},
	}.Start(t)
	// leave sends target and hangs up once there holds: the request is
	// where the test means to leave it.
	leave := func(target string, there func() bool, headers ...string) {
		t.Helper()
		conn, err := net.DialTimeout("tcp", GatewayAddr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\n%s\r\n", target, GatewayAddr, strings.Join(append(headers, ""), "\r\n"))
		fixture.WaitFor(t, target+" where the client leaves it", there)
		conn.Close()
	}
	atBackend := func(n string) func() bool {
		return func() bool {
			be.Mu.Lock()
			defer be.Mu.Unlock()
			return slices.ContainsFunc(be.All, func(s SeenRequest) bool { return strings.HasSuffix(s.RequestURI, "?n="+n) })
		}
	}
	inFlight := func() float64 {
		got, _ := ScrapeAdmin(t)
		return got[`caddy_http_statusgate_backend_requests_in_flight{guard=""}`]
	}
	queued := func() float64 {
		got, _ := ScrapeAdmin(t)
		return got[`caddy_http_statusgate_backend_requests_queued{class="keyed",guard=""}`]
	}
	be.HoldAnswers() // each answer waits for release
	leave("/api/v1/custom/votes?n=1", atBackend("1"), WithKey(KeyA))
	// n=1's client is gone, its request is not: it holds the one slot, and
	// n=4 waits behind it, and leaves the queue with its client.
	leave("/api/v1/custom/votes?n=4", func() bool { return queued() == 1 }, WithKey(KeyA))
	fixture.WaitFor(t, "n=4 to leave the queue", func() bool { return queued() == 0 })
	if n := inFlight(); n != 1 {
		t.Errorf("%v requests hold the backend's slot after n=1's client left, want n=1's", n)
	}
	be.Release()
	fixture.WaitFor(t, "the backend's slot to be free once n=1 is answered", func() bool { return inFlight() == 0 })
	be.HoldAnswers()
	leave("/api/v1/custom/votes?n=2", atBackend("2"))
	first := make(chan Response, 1)
	go func() { first <- Send(t, "GET", "/api/v1/custom/votes?n=3", WithKey(KeyA)) }()
	fixture.WaitFor(t, "n=3 to wait behind n=2", func() bool { return queued() == 1 })
	be.Release()
	if r := fixture.Recv(t, first, "n=3's answer"); r.Status != http.StatusOK {
		t.Errorf("the caller that stayed got %d", r.Status)
	}
	be.Take()

	want := map[string]logEntry{}
	for _, n := range []string{"1", "2", "4"} {
		want[n] = logEntry{Status: 499, Outcome: "client_gone"}
	}
	want["3"] = logEntry{Status: 200, Outcome: "served"}
	got := map[string]logEntry{}
	nRE := regexp.MustCompile(`[?&]n=(\d+)`)
	for deadline := time.Now().Add(Patience); len(got) < len(want) && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		access, _ := os.ReadFile(accessLog)
		clear(got)
		for _, line := range bytes.Split(bytes.TrimSpace(access), []byte("\n")) {
			var e logEntry
			if json.Unmarshal(line, &e) != nil {
				continue
			}
			if m := nRE.FindStringSubmatch(e.Request.URI); m != nil {
				got[m[1]] = logEntry{Status: e.Status, Outcome: e.Outcome}
			}
		}
	}
	for n, w := range want {
		if got[n] != w {
			t.Errorf("n=%s: logged status %d, outcome %q; want %d, %q", n, got[n].Status, got[n].Outcome, w.Status, w.Outcome)
		}
	}
}
