package caddymodule

// This file is what the package's tests share: a handler provisioned from
// a Caddyfile block in either form (newTestHandler, newDeclaredHandler,
// withBothForms), a request as Caddy's server hands it over and the reply,
// the stand-in backends, the config and provisioning helpers, and a live
// server with its streams.

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/statusgate/statusgate/caddymodule/apikey"
	"github.com/statusgate/statusgate/internal/scrape"
)

const testKey = "k3y-0123456789abcdef"

// backend is a recording stand-in for the next handler (reverse_proxy).
type backend struct {
	calls  []*http.Request
	status int
	header http.Header
	body   string
	err    error
	panic  any
}

func (b *backend) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	b.calls = append(b.calls, r.Clone(r.Context()))
	if b.err != nil {
		return b.err
	}
	if b.panic != nil {
		panic(b.panic)
	}
	hdr := w.Header()
	hdr.Set("Content-Type", "application/json; charset=utf-8")
	for k, v := range b.header {
		hdr[k] = v
	}
	hdr.Set("Content-Length", "1")
	status := b.status
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, err := io.WriteString(w, b.body)
	return err
}

// newTestHandler provisions a handler from the body of a statusgate Caddyfile
// block, in the form of 1.0: what follows it, the next a test passes to
// ServeHTTP, is its backend.
func newTestHandler(t testing.TB, block string) (*Handler, *observer.ObservedLogs) {
	t.Helper()
	return provisionTest(t, "statusgate {\n"+block+"\n}", caddy.Context{Context: context.Background()})
}

// newDeclaredHandler is newTestHandler in the form the docs recommend: be
// answers as a game server of its own on a loopback port, and the handler
// declares it (statusgate <address> { block }), so that what reaches be is
// what statusgate's own proxy sent. Nothing follows the handler: tests pass
// nothingAfter as next.
func newDeclaredHandler(t testing.TB, block string, be caddyhttp.Handler) (*Handler, *observer.ObservedLogs) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = be.ServeHTTP(exactLength{w}, r)
	}))
	t.Cleanup(srv.Close)
	// Caddy's reverse_proxy provisions only within a running config (it
	// asks it for its TLS app), as a declared backend does in a gateway:
	// one with nothing in it, for this test alone (a running config makes
	// every handler provisioned meanwhile one of a reload).
	if err := caddy.Load([]byte(`{"admin":{"disabled":true}}`), true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = caddy.Stop() })
	return provisionTest(t, "statusgate "+strings.TrimPrefix(srv.URL, "http://")+" {\n"+block+"\n}", caddy.ActiveContext())
}

// nothingAfter is what follows a declared statusgate in a test: nothing.
var nothingAfter = caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return nil })

// exactLength lets a test's backend answer over a real connection: a
// Content-Length the backend states (the stand-in says 1, for the
// gateway to mend) is left for net/http to work out.
type exactLength struct{ http.ResponseWriter }

func (w exactLength) WriteHeader(status int) {
	w.Header().Del("Content-Length")
	w.ResponseWriter.WriteHeader(status)
}

// withBothForms runs test in the form of 1.0 and the declared form: each
// time with a handler of block in front of be, and what follows it.
func withBothForms(t *testing.T, block string, be caddyhttp.Handler, test func(t *testing.T, h *Handler, next caddyhttp.Handler)) {
	t.Run("1.0", func(t *testing.T) {
		h, _ := newTestHandler(t, block)
		test(t, h, be)
	})
	t.Run("declared", func(t *testing.T) {
		h, _ := newDeclaredHandler(t, block, be)
		test(t, h, nothingAfter)
	})
}

// provisionTest provisions a handler from a statusgate Caddyfile segment,
// under a context of parent's.
func provisionTest(t testing.TB, segment string, parent caddy.Context) (*Handler, *observer.ObservedLogs) {
	t.Helper()
	h := new(Handler)
	d := caddyfile.NewTestDispenser(segment)
	if err := h.UnmarshalCaddyfile(d); err != nil {
		t.Fatalf("parse: %v", err)
	}
	ctx, cancel := caddy.NewContext(parent)
	t.Cleanup(cancel)
	core, logs := observer.New(zap.DebugLevel)
	if err := h.provisionWith(ctx, zap.New(core)); err != nil {
		t.Fatalf("provision: %v", err)
	}
	t.Cleanup(func() { _ = h.Cleanup() })
	return h, logs
}

// newRequest is a request as Caddy's server hands it to a handler: with the
// request's replacer and vars (the client IP, here httptest's 192.0.2.1).
func newRequest(method, target string) (*http.Request, *caddy.Replacer) {
	r := httptest.NewRequest(method, target, nil)
	repl := caddy.NewReplacer()
	return caddyhttp.PrepareRequest(r, repl, nil, &caddyhttp.Server{}), repl
}

type reply struct {
	*httptest.ResponseRecorder
	repl       *caddy.Replacer
	logSkipped bool // the access log leaves the request out
	envelope   struct {
		OK    bool `json:"ok"`
		Error struct {
			Status  int    `json:"status"`
			Message string `json:"message"`
			Path    string `json:"path"`
		} `json:"error"`
	}
}

func serve(t *testing.T, h *Handler, next caddyhttp.Handler, method, target string, header http.Header) reply {
	t.Helper()
	r, repl := newRequest(method, target)
	for k, v := range header {
		r.Header[k] = v
	}
	rec := httptest.NewRecorder()
	if err := h.ServeHTTP(rec, r, next); err != nil {
		t.Fatalf("ServeHTTP returned %v; the handler must answer every error itself", err)
	}
	skip, _ := caddyhttp.GetVar(r.Context(), caddyhttp.LogSkipVar).(bool)
	out := reply{ResponseRecorder: rec, repl: repl, logSkipped: skip}
	if strings.HasPrefix(rec.Body.String(), `{"ok":false`) {
		if err := json.Unmarshal(rec.Body.Bytes(), &out.envelope); err != nil {
			t.Fatalf("body is not JSON: %v\n%s", err, rec.Body)
		}
	}
	return out
}

func keyHeader(k string) http.Header { return http.Header{"X-Api-Key": {k}} }

const playerBody = `{"ok":true,"data":{"uuid":"u","name":"Alex","op":true,"banned":false,"discord":"2987","stat":{"jump":1},"detailed":{"list":[{"op":1,"keep":2}]}},"meta":{"version":"v1","server":"global","updatedAt":1,"authenticated":true}}`

// chunkedBackend writes its body in small pieces, as reverse_proxy does with
// what it reads from the upstream connection.
type chunkedBackend struct {
	body  string
	chunk int
}

func (b *chunkedBackend) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	for s := b.body; s != ""; {
		n := min(b.chunk, len(s))
		if _, err := io.WriteString(w, s[:n]); err != nil {
			return err
		}
		s = s[n:]
	}
	return nil
}

// parseTestCaddyfile runs UnmarshalCaddyfile on input the way NewTestDispenser
// sees it: file name "Testfile", first line 1.
func parseTestCaddyfile(input string) (*Handler, error) {
	h := new(Handler)
	err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input))
	return h, err
}

// forGoldenFiles runs check, as a subtest, on each file that pattern
// matches: its text up to a line of ten dashes, and after it, each trimmed
// of white space around it.
func forGoldenFiles(t *testing.T, pattern string, check func(t *testing.T, file, input, expected string)) {
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no %s files: %v", pattern, err)
	}
	newlines := regexp.MustCompile(`\r?\n`)
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			parts := strings.Split(newlines.ReplaceAllString(string(data), "\n"), "----------")
			if len(parts) != 2 {
				t.Fatalf("want one ---------- separator, found %d", len(parts)-1)
			}
			check(t, file, strings.TrimSpace(parts[0]), strings.TrimSpace(parts[1]))
		})
	}
}

func newGate() *gate {
	return &gate{entered: make(chan string, 64), release: make(chan struct{})}
}

// counter is a next handler that counts calls, waits for release when told
// to, and answers with a fixed status and body.
type counter struct {
	mu      sync.Mutex
	calls   []string // RequestURI + " " + Accept-Encoding
	status  int
	body    string
	entered chan struct{}
	release chan struct{} // nil: answer at once
}

func (c *counter) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	c.mu.Lock()
	c.calls = append(c.calls, r.URL.RequestURI()+" "+r.Header.Get("Accept-Encoding"))
	c.mu.Unlock()
	if c.release != nil {
		c.entered <- struct{}{}
		<-c.release
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(cmp.Or(c.status, http.StatusOK))
	_, err := io.WriteString(w, c.body)
	return err
}

func (c *counter) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

// keyLineOf runs keyArgs on one Caddyfile line that starts with key.
func keyLineOf(line string) (apikey.Key, error) {
	d := caddyfile.NewTestDispenser(line)
	d.Next()
	return keyArgs(d)
}

// seenBy records the placeholders as the handler after statusgate sees them.
type seenBy struct {
	next caddyhttp.Handler
	seen map[string]string
}

func (s *seenBy) ServeHTTP(w http.ResponseWriter, r *http.Request) error {
	repl := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	s.seen = map[string]string{}
	for _, p := range []string{placeholderEndpoint, placeholderKey, placeholderClient, placeholderOutcome} {
		if v, ok := repl.GetString(p); ok {
			s.seen[p] = v
		}
	}
	return s.next.ServeHTTP(w, r)
}

// scrapeStatusgate gathers reg's statusgate series.
func scrapeStatusgate(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got, err := scrape.Series(families, "caddy_http_statusgate_")
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// provisionIn provisions the handler of a statusgate Caddyfile block in ctx,
// whose metrics registry a test can then scrape, and cleans it up when the
// test ends.
func provisionIn(t *testing.T, ctx caddy.Context, block string) *Handler {
	t.Helper()
	h := new(Handler)
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(block)); err != nil {
		t.Fatal(err)
	}
	if err := h.provisionWith(ctx, zap.NewNop()); err != nil {
		t.Fatalf("provision: %v", err)
	}
	t.Cleanup(func() { _ = h.Cleanup() })
	return h
}

// provisionJSON provisions a handler from its JSON config, the way Caddy does
// once it has decoded the module: Unmarshal, then Provision with a context.
func provisionJSON(t *testing.T, config string) (*Handler, error) {
	t.Helper()
	h := new(Handler)
	if err := json.Unmarshal([]byte(config), h); err != nil {
		t.Fatalf("config %s: %v", config, err)
	}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	t.Cleanup(func() { _ = h.Cleanup() })
	return h, h.Provision(ctx)
}

// mustProvision is provisionJSON for configs that must be accepted.
func mustProvision(t *testing.T, config string) *Handler {
	t.Helper()
	h, err := provisionJSON(t, config)
	if err != nil {
		t.Fatalf("config %s: unexpected error: %v", config, err)
	}
	return h
}

// wantProvisionError checks that config is refused with a message holding every
// one of words.
func wantProvisionError(t *testing.T, config string, words ...string) {
	t.Helper()
	_, err := provisionJSON(t, config)
	wantErrorWords(t, err, words...)
}

// wantErrorWords checks that err is an error whose message holds every one of
// words.
func wantErrorWords(t *testing.T, err error, words ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want one containing %q", words)
	}
	for _, w := range words {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not contain %q", err, w)
		}
	}
}

const hex64 = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

func newLiveBackend(body string) *liveBackend {
	b := new(liveBackend)
	b.body.Store(body)
	return b
}

// liveServer serves h in front of next on a real listener, as Caddy's server
// would hand it requests; X-Test-Client is the client IP Caddy would have
// determined (default: the connection's).
func liveServer(t *testing.T, h *Handler, next caddyhttp.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = caddyhttp.PrepareRequest(r, caddy.NewReplacer(), nil, &caddyhttp.Server{})
		if ip := r.Header.Get("X-Test-Client"); ip != "" {
			caddyhttp.SetVar(r.Context(), caddyhttp.ClientIPVarKey, ip)
		}
		_ = h.ServeHTTP(w, r, next)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func openStream(t *testing.T, url string, header http.Header) *sse {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	req.Header.Set("Accept", "text/event-stream")
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	s := &sse{resp: resp, rd: bufio.NewReader(resp.Body)}
	if resp.StatusCode == 200 {
		// The reconnection hint comes first.
		if it := s.next(t); it.comment || it.end || it.data != "" {
			t.Fatalf("first item %+v, want the retry hint", it)
		}
	}
	return s
}

func plainGet(t *testing.T, url string, header http.Header) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

const liveStatus = `{"ok":true,"data":{"online":2,"motd":"hi"},"meta":{"version":"v1","updatedAt":%d,"authenticated":true}}`
