package gateway

// The caller's key never leaves the gateway, whatever the config says:
// nothing after a declared statusgate reaches anything (FastCGI too), and
// a stand-in backend, HTTP or FastCGI, that records every byte it gets
// never sees the key under configs that copy it somewhere (vars, map,
// escaped placeholders, the original request).

import (
	"fmt"
	"net"
	"net/http"
	"net/http/fcgi"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// recorder is a stand-in backend that keeps every request it gets whole,
// as text (the request line, Host, every header; for FastCGI every
// parameter), and answers as the game server would.
type recorder struct {
	mu   sync.Mutex
	seen []string
}

func (rc *recorder) keep(s string) {
	rc.mu.Lock()
	rc.seen = append(rc.seen, s)
	rc.mu.Unlock()
}

func (rc *recorder) all() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.seen)
}

func (rc *recorder) answer(w http.ResponseWriter, r *http.Request) {
	u := &url.URL{Path: r.URL.Path, RawQuery: r.URL.RawQuery}
	status, body := BackendResponse(u)
	WriteBackend(w, status, body)
}

// newHTTPRecorder is a recording HTTP backend: its address.
func newHTTPRecorder(t *testing.T) (*recorder, string) {
	rc := &recorder{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dump, _ := httputil.DumpRequest(r, true)
		rc.keep(string(dump))
		rc.answer(w, r)
	}))
	t.Cleanup(srv.Close)
	return rc, srv.Listener.Addr().String()
}

// newFastCGIRecorder is a recording FastCGI responder (php-fpm's part) on
// a loopback port: its address.
func newFastCGIRecorder(t *testing.T) (*recorder, string) {
	rc := &recorder{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go fcgi.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		env := fcgi.ProcessEnv(r)
		names := make([]string, 0, len(env))
		for k := range env {
			names = append(names, k)
		}
		sort.Strings(names)
		fmt.Fprintf(&b, "%s %s host=%s\n", r.Method, r.RequestURI, r.Host)
		for _, k := range names {
			fmt.Fprintf(&b, "%s=%s\n", k, env[k])
		}
		_ = r.Header.Write(&b)
		rc.keep(b.String())
		rc.answer(w, r)
	}))
	return rc, ln.Addr().String()
}

// keyIn reports whether s holds key, as written or escaped.
func keyIn(s, key string) bool {
	for _, form := range []string{key, url.QueryEscape(key), url.PathEscape(key), url.QueryEscape(url.QueryEscape(key))} {
		if strings.Contains(s, form) {
			return true
		}
	}
	return false
}

// wantNoKey fails if a request rc recorded holds key.
func wantNoKey(t *testing.T, rc *recorder, key, what string) {
	t.Helper()
	for _, s := range rc.all() {
		if keyIn(s, key) {
			t.Errorf("%s: the backend got the caller's key:\n%s", what, s)
		}
	}
}

// phpRoot is a site's root with an index.php, as php_fastcgi's try_files
// wants.
func phpRoot(t *testing.T) string {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "index.php"), []byte("<?php echo 'site';"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// keyedRequests sends the key in each way a caller can: the header, and
// ?key= (allow_query_key), to two endpoints.
func keyedRequests(t *testing.T) []Response {
	var out []Response
	for _, target := range []string{"/api/v1/server", "/api/v1/bans?limit=5"} {
		out = append(out, Send(t, "GET", target, WithKey(KeyA)))
		sep := "?"
		if strings.Contains(target, "?") {
			sep = "&"
		}
		out = append(out, Send(t, "GET", target+sep+"key="+url.QueryEscape(KeyA)))
	}
	return out
}

// TestPHPSiteAfterStatusgate: a PHP website with the API under /api
// (statusgate /api/*, php_fastcgi, file_server: php_fastcgi sorts after
// statusgate) gives php-fpm nothing of an API request, the key least of
// all; the website itself is still PHP's.
func TestPHPSiteAfterStatusgate(t *testing.T) {
	be := NewBackend(t)
	php, phpAddr := newFastCGIRecorder(t)
	root := phpRoot(t)
	Gateway{Routes: fmt.Sprintf(`root * %s
	statusgate /api/* %s {
		key %s
		allow_query_key
		%s
	}
	php_fastcgi %s
	file_server`, root, be.Addr(), KeyA, strings.Join(NoSharing, "\n\t\t"), phpAddr)}.Start(t)
	for _, r := range keyedRequests(t) {
		if r.Status != http.StatusBadGateway {
			t.Errorf("an API request was answered %d, want 502: php_fastcgi after statusgate is stopped", r.Status)
		}
	}
	if seen := php.all(); len(seen) != 0 {
		t.Errorf("php-fpm got %d API requests, want none; the first:\n%s", len(seen), seen[0])
	}
	wantNoKey(t, php, KeyA, "php_fastcgi after statusgate")
	Send(t, "GET", "/index.php")
	if n := len(php.all()); n != 1 {
		t.Errorf("the website: %d FastCGI requests, want php-fpm asked once", n)
	}

	// The fix the docs give: statusgate and the website in handle blocks,
	// which exclude each other.
	Gateway{Routes: fmt.Sprintf(`root * %s
	handle /api/* {
		statusgate %s {
			key %s
			allow_query_key
			%s
		}
	}
	handle {
		php_fastcgi %s
		file_server
	}`, root, be.Addr(), KeyA, strings.Join(NoSharing, "\n\t\t\t"), phpAddr)}.Start(t)
	for _, r := range keyedRequests(t) {
		if r.Status != http.StatusOK {
			t.Errorf("with handle blocks, an API request was answered %d, want 200", r.Status)
		}
	}
	Send(t, "GET", "/index.php")
	if n := len(php.all()); n != 2 {
		t.Errorf("with handle blocks: %d FastCGI requests in all, want the website's alone (2)", n)
	}
	wantNoKey(t, php, KeyA, "php_fastcgi beside statusgate")
}

// TestInvokeFastCGIAfterStatusgate: an invoke of a named route whose
// reverse_proxy speaks FastCGI, after a declared statusgate, is stopped
// before it connects.
func TestInvokeFastCGIAfterStatusgate(t *testing.T) {
	be := NewBackend(t)
	php, phpAddr := newFastCGIRecorder(t)
	root := phpRoot(t)
	Gateway{
		Site: []string{fmt.Sprintf("root * %s", root)},
		// invoke sorts before statusgate: a route block keeps them in order.
		Routes: fmt.Sprintf(`route {
		statusgate %s {
			key %s
			allow_query_key
			%s
		}
		invoke php
	}`, be.Addr(), KeyA, strings.Join(NoSharing, "\n\t\t\t")),
		Sites: []string{fmt.Sprintf(`&(php) {
	reverse_proxy %s {
		transport fastcgi {
			root %s
		}
	}
}`, phpAddr, root)},
	}.Start(t)
	for _, r := range keyedRequests(t) {
		if r.Status == http.StatusOK {
			t.Errorf("answered 200 with a handler after statusgate that sends the request elsewhere")
		}
	}
	if seen := php.all(); len(seen) != 0 {
		t.Errorf("the invoked FastCGI backend got %d requests, want none; the first:\n%s", len(seen), seen[0])
	}
	if n := len(be.Take()); n != 0 {
		t.Errorf("the declared backend was asked %d times", n)
	}
}

// TestDeclaredFastCGIBackend: statusgate's own declared backend over
// FastCGI (proxy { transport fastcgi }) is sent no key: not in REQUEST_URI
// (the original request's target), a header, or a parameter of its env.
func TestDeclaredFastCGIBackend(t *testing.T) {
	fc, addr := newFastCGIRecorder(t)
	root := phpRoot(t)
	Gateway{Routes: fmt.Sprintf(`vars fwd {http.request.header.X-API-Key}
	statusgate %s {
		key %s
		allow_query_key
		%s
		proxy {
			transport fastcgi {
				root %s
				env FORWARDED_KEY {http.vars.fwd}
			}
		}
	}`, addr, KeyA, strings.Join(NoSharing, "\n\t\t"), root)}.Start(t)
	answered := 0
	for _, r := range keyedRequests(t) {
		if r.Status == http.StatusOK {
			answered++
		}
	}
	if answered == 0 {
		t.Errorf("no keyed request was answered through the FastCGI backend")
	}
	if len(fc.all()) == 0 {
		t.Fatalf("the FastCGI backend got nothing")
	}
	wantNoKey(t, fc, KeyA, "statusgate's FastCGI backend")
	for _, s := range fc.all() {
		if strings.Contains(s, "key=") {
			t.Errorf("a ?key= pair reached the FastCGI backend:\n%s", s)
		}
	}
}

// keySources are placeholders that hold the caller's key, or its ?key=,
// while the client's request is as it came: each is written into the
// request to the backend by every sink of keySinks.
var keySources = []string{
	"{http.request.header.X-API-Key}",
	"{http.request.orig_uri}",
	"{http.request.orig_uri.query}",
	"{http.request.orig_uri.query.key}",
	"{%query}",
	"{%uri}",
	"{http.request.uri_escaped}",
	"{http.request.uri.query_escaped}",
	"{query}",
	"{http.request.uri.query.key}",
}

// keySink is one way a config writes a value into the request to the
// backend: lines before statusgate (pre) and of its proxy (proxy), with
// %s for the value.
type keySink struct {
	name  string
	pre   string
	proxy []string
}

var keySinks = []keySink{
	{name: "header_up", proxy: []string{"header_up X-A %s"}},
	{name: "header_up Host", proxy: []string{"header_up Host %s"}},
	{name: "vars", pre: "vars fwd %s", proxy: []string{"header_up X-A {http.vars.fwd}"}},
	{name: "map", pre: "map {http.request.host} {fwd} {\n\t\tdefault %s\n\t}", proxy: []string{"header_up X-A {fwd}"}},
	// A placeholder that picks the server, read before statusgate decides.
	{name: "map into Host", pre: "map {http.request.host} {fwd} {\n\t\tdefault %s\n\t}", proxy: []string{"header_up Host {fwd}"}},
	{name: "rewrite", proxy: []string{"rewrite /api/v1/server?x=%s"}},
	{name: "request_header", pre: "request_header X-A %s"},
}

// TestKeyNeverLeaves drives config shapes, each a source of the key in a
// sink of keySinks, in both forms, with the key sent in the header and in
// the query (allow_query_key): the config is refused at load with the fix,
// or the recording backend never gets the key, whatever it answers.
func TestKeyNeverLeaves(t *testing.T) {
	rc, addr := newHTTPRecorder(t)
	lines := append([]string{"key " + KeyA, "allow_query_key"}, NoSharing...)
	for _, sink := range keySinks {
		for _, src := range keySources {
			t.Run(sink.name+" of "+src, func(t *testing.T) {
				Forms(t, func(t *testing.T, legacy bool) {
					var proxy []string
					for _, l := range sink.proxy {
						proxy = append(proxy, strings.ReplaceAll(l, "%s", src))
					}
					routes := StatusgateLines(addr, lines, proxy, legacy)
					if sink.pre != "" {
						routes = strings.ReplaceAll(sink.pre, "%s", src) + "\n\t" + routes
					}
					cf := Gateway{Routes: routes}.Caddyfile()
					what := sink.name + " of " + src
					if status, msg := PostCaddyfile(t, cf); status != http.StatusOK {
						if !strings.Contains(msg, "API key") {
							t.Errorf("%s: refused at load without naming the key: %d %s", what, status, msg)
						}
						return
					}
					AwaitOldListeners(t, Adapt(t, cf))
					before := len(rc.all())
					keyedRequests(t)
					if r := Send(t, "GET", "/api/v1/status"); r.Status != http.StatusOK {
						t.Errorf("%s: an anonymous request was answered %d, want 200: the config works", what, r.Status)
					}
					seen := rc.all()[before:]
					if len(seen) > 0 {
						t.Logf("%s: %d requests at the backend; the first:\n%s", what, len(seen), seen[0])
					}
					for _, s := range seen {
						if keyIn(s, KeyA) {
							t.Errorf("%s: the backend got the caller's key:\n%s", what, s)
						}
					}
				})
			})
		}
	}
}

// TestHeadersAfterStatusgateNotShared: a response header that a handler
// after a declared statusgate sets (the caller's address, a request ID) is
// the caller's own: the next caller, served from the cache, never gets the
// first caller's.
func TestHeadersAfterStatusgateNotShared(t *testing.T) {
	be := NewBackend(t)
	Gateway{Shared: true, Routes: fmt.Sprintf(`route {
		statusgate %s {
			key %s
		}
		header X-Request {http.request.uuid}
	}`, be.Addr(), KeyA)}.Start(t)
	first := Send(t, "GET", "/api/v1/status")
	second := Send(t, "GET", "/api/v1/status")
	if first.Status != http.StatusOK || second.Status != http.StatusOK {
		t.Fatalf("answers %d and %d, want 200", first.Status, second.Status)
	}
	if n := len(be.Take()); n != 1 {
		t.Fatalf("%d trips to the backend, want 1: the second answer from the cache", n)
	}
	if first.Header.Get("X-Request") == "" {
		t.Errorf("the caller whose request made the trip lost the header its handler set")
	}
	if got := second.Header.Get("X-Request"); got != "" && got == first.Header.Get("X-Request") {
		t.Errorf("the second caller got the first caller's X-Request %q from the cache", got)
	}
}

// TestTrustedProxyAfterStatusgate: a `vars trusted_proxy true` after
// statusgate cannot make the proxy pass the client's X-Forwarded-For and
// X-Forwarded-Host to the backend, in either form.
func TestTrustedProxyAfterStatusgate(t *testing.T) {
	Forms(t, func(t *testing.T, legacy bool) {
		be := NewBackend(t)
		lines := append([]string{"key " + KeyA}, NoSharing...)
		routes := StatusgateLines(be.Addr(), lines, nil, legacy)
		if legacy {
			// vars sorts before statusgate: a route block keeps them in order.
			routes = strings.Replace(routes, "\n\treverse_proxy", "\n\tvars trusted_proxy true\n\treverse_proxy", 1)
		} else {
			routes += "\n\tvars trusted_proxy true"
		}
		Gateway{Routes: "route {\n\t" + routes + "\n\t}"}.Start(t)
		r := Send(t, "GET", "/api/v1/status", "X-Forwarded-For: 6.6.6.6", "X-Forwarded-Host: evil.test")
		if r.Status != http.StatusOK {
			t.Fatalf("answered %d, want 200", r.Status)
		}
		for _, s := range be.Take() {
			if xff := s.Header.Get("X-Forwarded-For"); strings.Contains(xff, "6.6.6.6") {
				t.Errorf("the backend got the client's X-Forwarded-For %q", xff)
			}
			if xfh := s.Header.Get("X-Forwarded-Host"); strings.Contains(xfh, "evil") {
				t.Errorf("the backend got the client's X-Forwarded-Host %q", xfh)
			}
		}
	})
}
