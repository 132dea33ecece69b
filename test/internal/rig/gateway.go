// Package rig is what statusgate's integration test packages (test/gateway,
// test/live, test/network, test/protect, test/reload, test/widget, test/docs)
// share: a real Caddy, started in-process by caddytest, with statusgate in
// front of reverse_proxy and a recording stand-in for the ServerAPI plugin
// behind it (backend.go), the one config builder (Gateway) and the
// assertions. The test packages dot-import it, so that a test reads as it did
// when they were one package.
//
// Each test package is a test binary of its own with its own Caddy
// (RunWithCaddy, from its TestMain), on free loopback ports taken when the
// binary starts (caddy.go: AdminPort, HTTPPort, and WidgetPort for the
// widget's page in test/widget); the tests of one package each load their own
// config, so none of them runs in parallel, while the packages run at once,
// as go test runs packages. Two runs at once, in two checkouts, do not meet.
package rig

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"

	// The gateway, and caddy-ratelimit, which tests compose after it
	// (rate_limit in test/gateway, test/live, test/protect and the docs).
	_ "github.com/mholt/caddy-ratelimit"
	_ "github.com/statusgate/statusgate/caddymodule"
	"github.com/statusgate/statusgate/internal/fixture"
)

// Keys. Every string here is a secret: the backend checks that none of them
// ever reaches it (backend.checkInvariants), and the log test that none ends
// up in a log file.
const (
	KeyA   = "kA-7f3c9e1d5b2a4c68e0f1"
	KeyB   = "kB-0d9e8c7b6a5f4e3d2c1b"
	KeyC   = "kC-a1b2c3d4e5f60718293a"
	KeyEnv = "kEnv-5e4d3c2b1a09f8e7d6c5"
	KeyFil = "kFile-19283746556473829100"
	BadKey = "kBad-ffffffffffffffffffff"
)

var secrets = []string{KeyA, KeyB, KeyC, KeyEnv, KeyFil, BadKey}

// WithKey is the header line that sends k.
func WithKey(k string) string { return "X-API-Key: " + k }

// Gateway is one Caddy config: statusgate in front of its backend, on
// HTTPPort of loopback.
// It is the only config builder of the test packages.
type Gateway struct {
	Statusgate []string // lines of the statusgate block
	Upstream   string   // the backend, host:port
	Transport  []string // lines of the proxy's transport http block
	// Legacy writes the form of 1.0: statusgate without upstreams,
	// followed by reverse_proxy; without it, statusgate declares its
	// backend (statusgate <upstream> { ... proxy { ... } }).
	Legacy bool
	// Routes, when set, are the site's handlers in place of statusgate
	// and its backend (statusgate in handle blocks, after a map, ...).
	Routes string
	Global []string // global options; default: errors only on stderr
	Site   []string // more site directives, such as log
	Sites  []string // more site blocks, whole
	// AutoHTTPS is the global auto_https value; default off. With any other
	// (disable_redirects, say) Caddy writes its "adjusted config" debug log.
	AutoHTTPS string
	// GameMetrics keeps the game's metrics on (docs/observability.md, "The
	// game's metrics"). Off, the default here, a scrape of /metrics asks
	// the backend nothing, so that what a test counts at its backend (and
	// what holds its places) is its own requests.
	GameMetrics bool
	// Shared keeps the defaults of coalescing, the micro-cache and the
	// per-client limit. Off, the default here, every request makes its own
	// trip to the backend, which is what most tests count, and the many
	// concurrent callers of one test (all from 127.0.0.1) are not one client
	// held to four requests; the protection tests turn it on.
	Shared bool
}

// GameMetricsOff is the global option that switches the game's metrics
// off: a scrape then asks no backend anything.
const GameMetricsOff = "statusgate {\n\t\tgame_metrics off\n\t}"

// NoSharing switches off coalescing, every endpoint's default cache and the
// per-client limit.
var NoSharing = []string{"coalesce off", "cache status off", "cache entities off",
	"cache worlds off", "cache gamerules off", "cache spawnlimits off", "max_per_client off"}

func (g Gateway) Caddyfile() string {
	lines := g.Statusgate
	if !g.Shared {
		lines = append(slices.Clip(lines), NoSharing...)
	}
	global := g.Global
	if global == nil {
		global = []string{"log {\n\t\tlevel ERROR\n\t}"}
	}
	if !g.GameMetrics && !slices.ContainsFunc(global, func(l string) bool { return strings.HasPrefix(l, "statusgate") }) {
		global = append(slices.Clip(global), GameMetricsOff)
	}
	autoHTTPS := g.AutoHTTPS
	if autoHTTPS == "" {
		autoHTTPS = "off"
	}
	return fmt.Sprintf(`{
	skip_install_trust
	admin localhost:%d
	http_port %d
	https_port %d
	default_bind 127.0.0.1
	auto_https %s
	grace_period 5s
	%s
}

:%d {
	%s
	%s
}
%s`, AdminPort, HTTPPort, HTTPSPort, autoHTTPS, strings.Join(global, "\n\t"), HTTPPort, strings.Join(g.Site, "\n\t"),
		g.handlers(lines), strings.Join(g.Sites, "\n"))
}

// handlers are the site's handlers after g.Site: Routes, or statusgate with
// lines in front of g.Upstream.
func (g Gateway) handlers(lines []string) string {
	if g.Routes != "" {
		return g.Routes
	}
	return backendLines(g.Upstream, lines, g.Transport, g.Legacy)
}

// backendLines is statusgate with the lines of its block in front of
// upstream, in the declared form or, when legacy, in the form of 1.0, as a
// site block's lines (one tab in); transport are lines of the proxy's
// transport http block.
func backendLines(upstream string, lines, transport []string, legacy bool) string {
	var proxy []string
	if len(transport) > 0 {
		proxy = append(proxy, "transport http {\n\t\t\t"+strings.Join(transport, "\n\t\t\t")+"\n\t\t}")
	}
	return StatusgateLines(upstream, lines, proxy, legacy)
}

// StatusgateLines is statusgate in front of upstream with the lines of its
// block and proxy, reverse_proxy's subdirectives, in the declared form or,
// when legacy, in the form of 1.0 (reverse_proxy after statusgate), as a
// site block's lines (one tab in).
func StatusgateLines(upstream string, lines, proxy []string, legacy bool) string {
	block := strings.Join(lines, "\n\t\t")
	indent := func(ls []string, tabs string) string {
		return strings.ReplaceAll(strings.Join(ls, "\n"), "\n", "\n"+tabs)
	}
	if legacy {
		rp := "reverse_proxy " + upstream
		if len(proxy) > 0 {
			rp += " {\n\t\t" + indent(proxy, "\t\t") + "\n\t}"
		}
		return "statusgate {\n\t\t" + block + "\n\t}\n\t" + rp
	}
	if len(proxy) > 0 {
		block += "\n\t\tproxy {\n\t\t\t" + indent(proxy, "\t") + "\n\t\t}"
	}
	return "statusgate " + upstream + " {\n\t\t" + block + "\n\t}"
}

// Forms runs f as two subtests, one with statusgate declaring its backend
// and one in the form of 1.0 (legacy): what both must keep.
func Forms(t *testing.T, f func(t *testing.T, legacy bool)) {
	t.Run("declared", func(t *testing.T) { f(t, false) })
	t.Run("1.0", func(t *testing.T) { f(t, true) })
}

// Start loads the config into the in-process Caddy (caddy.go) and
// waits until it is the running one, alone on its ports.
func (g Gateway) Start(t *testing.T) *caddytest.Tester {
	t.Helper()
	return LoadCaddyfile(t, g.Caddyfile())
}

// LoadCaddyfile loads a whole Caddyfile into the in-process Caddy as a
// reload would, and returns once it is the running config and the previous
// config's listeners are closed (AwaitOldListeners): from then on, every
// new connection reaches this config. Every config a test loads goes
// through here.
func LoadCaddyfile(t *testing.T, caddyfile string) *caddytest.Tester {
	t.Helper()
	failed := t.Failed()
	tc := caddytest.NewTester(t)
	tc.InitServer(caddyfile, "caddyfile")
	if t.Failed() && !failed {
		t.Fatalf("config not loaded:\n%s", caddyfile)
	}
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatalf("adapting the config: %v", err)
	}
	AwaitOldListeners(t, adapted)
	return tc
}

// StartDefault loads `statusgate { key keyA }` in front of be.
func StartDefault(t *testing.T, be *Backend, lines ...string) {
	t.Helper()
	Gateway{Upstream: be.Addr(), Statusgate: append([]string{"key " + KeyA}, lines...)}.Start(t)
}

// Response is what came back over the wire for one request.
type Response struct {
	Status   int
	Header   http.Header
	Body     []byte
	Chunked  bool   // sent with Transfer-Encoding: chunked
	Trailing []byte // bytes after the response on a Connection: close connection
	Err      error  // the response could not be read in full (a cut connection)
}

// Send is the one request helper. It writes the request by hand on a new TCP
// connection, so the target reaches Caddy byte for byte as written here (Go's
// client would normalise some spellings), and reads the response with
// net/http. headers are "Name: value" lines; Host defaults to the gateway.
// It fails nothing itself and is safe in any goroutine: a request that got no
// response has Status 0, one whose body broke off keeps its status, and both
// have Err set, which every want* helper reports.
func Send(t testing.TB, method, target string, headers ...string) Response {
	t.Helper()
	var req strings.Builder
	fmt.Fprintf(&req, "%s %s HTTP/1.1\r\n", method, target)
	if !slices.ContainsFunc(headers, func(h string) bool { return strings.HasPrefix(strings.ToLower(h), "host:") }) {
		req.WriteString("Host: " + GatewayAddr + "\r\n")
	}
	for _, h := range headers {
		req.WriteString(h + "\r\n")
	}
	req.WriteString("Connection: close\r\n\r\n")
	return SendRaw(t, method, req.String())
}

// SendRaw writes raw, a whole request (head and body), on a new TCP
// connection and reads the response to it as send does; method is the
// request's, for reading the response.
func SendRaw(t testing.TB, method, raw string) Response {
	t.Helper()
	return SendRawTo(t, GatewayAddr, method, raw)
}

// SendRawTo is sendRaw to another of the in-process Caddy's listeners, at
// addr (host:port).
func SendRawTo(t testing.TB, addr, method, raw string) Response {
	t.Helper()
	target, _, _ := strings.Cut(strings.TrimPrefix(raw, method+" "), " ")
	fail := func(what string, err error) Response {
		return Response{Err: fmt.Errorf("%s %q: %s: %w", method, target, what, err)}
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return fail("dial", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(Patience))
	if _, err := io.WriteString(conn, raw); err != nil {
		return fail("writing the request", err)
	}

	br := bufio.NewReader(conn)
	res, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return fail("reading the response", err)
	}
	r := Response{Status: res.StatusCode, Header: res.Header, Chunked: slices.Contains(res.TransferEncoding, "chunked")}
	r.Body, r.Err = io.ReadAll(res.Body)
	if r.Err == nil {
		r.Trailing, _ = io.ReadAll(br)
	}
	return r
}

// ErrorMessages are the messages of the envelopes the gateway writes itself
// (docs/request.md, "The gateway's own responses").
var ErrorMessages = map[int]string{
	400: "Bad request",
	401: "A valid API key is required",
	404: "Not found",
	405: "Method not allowed",
	429: "Too many requests",
	502: "Bad gateway",
	503: "Backend busy",
	504: "Gateway timeout",
}

var updatedAtRE = regexp.MustCompile(`,"meta":\{"version":"v1","updatedAt":(\d+)\}\}$`)

// WantError asserts the gateway's own error envelope, byte for byte: status,
// message, the path the client sent (decoded), a current updatedAt, and the
// backend's JSON headers.
func WantError(t testing.TB, r Response, status int, path string) {
	t.Helper()
	if r.Err != nil {
		t.Errorf("%d %q: body broke off: %v", status, path, r.Err)
		return
	}
	if r.Status != status {
		t.Errorf("path %q: status %d, want %d; body %s", path, r.Status, status, r.Body)
		return
	}
	m := updatedAtRE.FindSubmatch(r.Body)
	if m == nil {
		t.Errorf("path %q: not the gateway's error envelope: %s", path, r.Body)
		return
	}
	if ms, _ := strconv.ParseInt(string(m[1]), 10, 64); time.Since(time.UnixMilli(ms)).Abs() > time.Minute {
		t.Errorf("path %q: updatedAt %s is not now", path, m[1])
	}
	want := fmt.Sprintf(`{"ok":false,"error":{"status":%d,"message":%s,"path":%s},"meta":{"version":"v1","updatedAt":%s}}`,
		status, JSONString(ErrorMessages[status]), JSONString(path), m[1])
	if string(r.Body) != want {
		t.Errorf("path %q: envelope\n got %s\nwant %s", path, r.Body, want)
	}
	WantJSONHeaders(t, r, path)
	if got := r.Header.Get("Content-Length"); got != strconv.Itoa(len(r.Body)) {
		t.Errorf("path %q: Content-Length %q for %d bytes", path, got, len(r.Body))
	}
}

// WantJSONHeaders asserts the headers of every JSON response (the backend's and
// the gateway's own).
func WantJSONHeaders(t testing.TB, r Response, what string) {
	t.Helper()
	for name, want := range map[string]string{
		"Content-Type":                  "application/json; charset=utf-8",
		"X-Content-Type-Options":        "nosniff",
		"Cache-Control":                 "no-store",
		"Access-Control-Allow-Origin":   "*",
		"Access-Control-Expose-Headers": "Retry-After",
	} {
		if got := r.Header.Values(name); len(got) != 1 || got[0] != want {
			t.Errorf("%s: %s %q, want %q", what, name, got, want)
		}
	}
}

// notFound is the 404 envelope for target, whose decoded path is what the
// gateway reports.
func WantNotFound(t testing.TB, r Response, target string) {
	t.Helper()
	WantError(t, r, http.StatusNotFound, DecodedPath(t, target))
}

// DecodedPath is the path Go's server gives a handler for a request target.
func DecodedPath(t testing.TB, target string) string {
	t.Helper()
	u, err := url.ParseRequestURI(target)
	if err != nil {
		t.Errorf("target %q: %v", target, err)
		return ""
	}
	return u.Path
}

func JSONString(s string) string {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// WantBackendBytes asserts a response that passed the gateway untouched: 200
// and exactly the bytes the well-behaved backend sends for target.
func WantBackendBytes(t testing.TB, r Response, target string) {
	t.Helper()
	WantUntouched(t, r, target, BackendBody(target))
}

// WantUntouched asserts 200 and exactly the backend's bytes.
func WantUntouched(t testing.TB, r Response, what string, backendBytes []byte) {
	t.Helper()
	if r.Err != nil || r.Status != http.StatusOK || !bytes.Equal(r.Body, backendBytes) {
		t.Errorf("%s: got %d %q (err %v)\nwant 200 with the backend's bytes %s", what, r.Status, Clip(r.Body), r.Err, Clip(backendBytes))
	}
}

// WantFiltered asserts a response that went through the field layer: 200 and
// the well-behaved backend's document for target with the member names in
// fields removed at any depth outside the top-level meta, meta.hiddenFields
// listing those that were removed in the order of fields, and
// meta.authenticated false. The comparison is semantic (numbers as written);
// tests check raw bytes apart.
func WantFiltered(t testing.TB, r Response, target string, fields ...string) {
	t.Helper()
	WantFilteredFrom(t, r, target, BackendBody(target), fields...)
}

// WantFilteredFrom is wantFiltered for a document the backend sent.
func WantFilteredFrom(t testing.TB, r Response, what string, backendBytes []byte, fields ...string) {
	t.Helper()
	if r.Err != nil || r.Status != http.StatusOK {
		t.Errorf("%s: got %d %q (err %v), want 200", what, r.Status, Clip(r.Body), r.Err)
		return
	}
	want := referenceFilter(t, backendBytes, fields)
	got := decodeJSON(t, r.Body)
	if !reflect.DeepEqual(got, want) {
		wb, _ := json.Marshal(want)
		t.Errorf("%s: filtered body\n got %s\nwant %s", what, Clip(r.Body), Clip(wb))
	}
	WantJSONHeaders(t, r, what)
}

// referenceFilter is the field layer's oracle, written the slow, obvious way
// (fixture.FilteredValue: decode, walk, delete). Like every helper here it is
// safe in any goroutine.
func referenceFilter(t testing.TB, body []byte, fields []string) any {
	t.Helper()
	want, err := fixture.FilteredValue(body, fields)
	if err != nil {
		t.Errorf("backend document %s: %v", Clip(body), err)
	}
	return want
}

// decodeJSON decodes one JSON document, numbers as json.Number.
func decodeJSON(t testing.TB, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Errorf("not JSON (%v): %s", err, Clip(b))
		return nil
	}
	if dec.More() {
		t.Errorf("trailing data after the JSON document: %s", Clip(b))
	}
	return v
}

// MemberNames lists every object member name in a JSON document, at any depth,
// outside the top-level meta, as encoding/json unescapes them.
func MemberNames(t testing.TB, body []byte) map[string]bool {
	t.Helper()
	names := map[string]bool{}
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				names[k] = true
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	doc, _ := decodeJSON(t, body).(map[string]any)
	for k, v := range doc {
		if k != "meta" {
			names[k] = true
			walk(v)
		}
	}
	return names
}

// Meta returns the top-level meta object of a JSON document.
func Meta(t testing.TB, body []byte) map[string]any {
	t.Helper()
	doc, _ := decodeJSON(t, body).(map[string]any)
	m, _ := doc["meta"].(map[string]any)
	return m
}

// Clip shortens a body for a failure message.
func Clip(b []byte) string {
	if len(b) > 600 {
		return string(b[:300]) + fmt.Sprintf(" …(%d bytes)… ", len(b)-600) + string(b[len(b)-300:])
	}
	return string(b)
}

// Gunzip decompresses a gzip body.
func Gunzip(t testing.TB, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err == nil {
		b, err = io.ReadAll(zr)
	}
	if err != nil {
		t.Errorf("gunzip: %v", err)
	}
	return b
}

// JSONUnmarshalStrict decodes b into v and refuses members v does not name.
func JSONUnmarshalStrict(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
