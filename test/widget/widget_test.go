package widget

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/chromedp/cdproto/network"
	cdpage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/statusgate/statusgate/internal/sim"
	"github.com/statusgate/statusgate/test/chromium"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// demoAPI is the data-api of examples/widget/index.html, which the demo's
// Caddy fills in with its templates; the test pages are copies with it
// replaced.
const demoAPI = `data-api="{{placeholder "http.vars.statusgate_api"}}"`

// browser is the one headless Chromium of the test binary, started by the
// first browser test and stopped by TestMain (main_test.go): it takes seconds to start.
var browser struct {
	once sync.Once
	ctx  context.Context
	stop func()
	err  error
}

// needBrowser starts Chromium on first use, and skips the test where it is not
// installed, unless STATUSGATE_REQUIRE_BROWSER is set, as .ci/run sets it after
// installing chromium: there a missing browser must not pass as a skip.
func needBrowser(t *testing.T) {
	t.Helper()
	browser.once.Do(func() { browser.ctx, browser.stop, browser.err = chromium.Start(900, 1000) })
	if errors.Is(browser.err, chromium.ErrMissing) && os.Getenv("STATUSGATE_REQUIRE_BROWSER") == "" {
		t.Skipf("browser tests skipped: %v", browser.err)
	}
	if browser.err != nil {
		t.Fatalf("starting chromium: %v", browser.err)
	}
}

// widgetSite is the Caddy site that serves the widget from widgetOrigin:
// widget.js and widget.css straight from examples/widget, and the test's
// copies of index.html (page-*.html) from dir.
func widgetSite(t *testing.T, dir string) string {
	t.Helper()
	repo, err := filepath.Abs(filepath.Join(RepoRoot, "examples", "widget"))
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`%s {
	bind 127.0.0.1
	@pages path /page-*
	handle @pages {
		root * %q
		file_server
	}
	handle {
		root * %q
		file_server
	}
}
`, WidgetOrigin, dir, repo)
}

// widgetPage writes examples/widget/index.html to dir as page-<name>.html with
// its data-api replaced by api and attrs added, as an operator embedding the
// widget would, and returns its URL.
func widgetPage(t *testing.T, dir, name, api, attrs string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot, "examples", "widget", "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), demoAPI); n != 1 {
		t.Fatalf("index.html has %d times %s, want 1", n, demoAPI)
	}
	b = []byte(strings.Replace(string(b), demoAPI, fmt.Sprintf(`data-api=%q %s`, api, attrs), 1))
	file := "page-" + name + ".html"
	if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return WidgetOrigin + "/" + file
}

// simulated routes a request like the demo backend (internal/sim), with a
// fixed seed so that its answers are the same at every call.
func simulated(t *testing.T) func(*url.URL) (int, []byte) {
	t.Helper()
	seed := int64(20260717)
	s := &sim.Sim{Seed: &seed}
	ctx, cancel := caddy.NewContext(caddy.Context{Context: context.Background()})
	t.Cleanup(cancel)
	if err := s.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	return func(u *url.URL) (int, []byte) {
		rec := httptest.NewRecorder()
		_ = s.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, u.RequestURI(), nil), nil)
		return rec.Code, rec.Body.Bytes()
	}
}

// call is one HTTP exchange the page made, as Chromium reported it.
type call struct {
	id      network.RequestID
	method  string
	url     string
	kind    network.ResourceType // Fetch, Preflight, Document, Script, …
	header  network.Headers      // the request's, as the page set them
	status  int64
	done    bool
	failure string
}

// page is one tab on a widget page: what it requested and any uncaught
// JavaScript exception.
type page struct {
	t   *testing.T
	ctx context.Context

	mu         sync.Mutex
	calls      []*call
	exceptions []string
}

// openPage opens target in a new tab of the shared browser and records its
// network traffic from the first request on.
func openPage(t *testing.T, target string) *page {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser.ctx)
	t.Cleanup(cancel)
	p := &page{t: t, ctx: ctx}
	chromedp.ListenTarget(ctx, p.event)
	if err := chromedp.Run(ctx, network.Enable(), chromedp.Navigate(target)); err != nil {
		t.Fatalf("opening %s: %v", target, err)
	}
	return p
}

func (p *page) event(ev any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	find := func(id network.RequestID) *call {
		for i := len(p.calls) - 1; i >= 0; i-- {
			if p.calls[i].id == id {
				return p.calls[i]
			}
		}
		return nil
	}
	switch ev := ev.(type) {
	case *network.EventRequestWillBeSent:
		p.calls = append(p.calls, &call{id: ev.RequestID, method: ev.Request.Method, url: ev.Request.URL, kind: ev.Type, header: ev.Request.Headers})
	case *network.EventResponseReceived:
		if c := find(ev.RequestID); c != nil {
			c.status = ev.Response.Status
		}
	case *network.EventLoadingFinished:
		if c := find(ev.RequestID); c != nil {
			c.done = true
		}
	case *network.EventLoadingFailed:
		if c := find(ev.RequestID); c != nil {
			c.failure = ev.ErrorText
		}
	case *runtime.EventExceptionThrown:
		p.exceptions = append(p.exceptions, ev.ExceptionDetails.Error())
	}
}

// apiCalls returns the page's finished calls to the API since the last
// apiCalls, preflights included.
func (p *page) apiCalls() []call {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []call
	rest := p.calls[:0]
	for _, c := range p.calls {
		switch {
		case !strings.HasPrefix(c.url, GatewayURL+"/"):
			continue
		case c.done || c.failure != "":
			out = append(out, *c)
		default:
			rest = append(rest, c) // still under way
		}
	}
	p.calls = rest
	return out
}

// body is the response body Chromium kept for a finished call.
func (p *page) body(c call) []byte {
	p.t.Helper()
	var b []byte
	err := chromedp.Run(p.ctx, chromedp.ActionFunc(func(ctx context.Context) error {
		var err error
		b, err = network.GetResponseBody(c.id).Do(ctx)
		return err
	}))
	if err != nil {
		p.t.Fatalf("body of %s %s: %v", c.method, c.url, err)
	}
	return b
}

// run runs actions in the tab, with a deadline.
func (p *page) run(what string, actions ...chromedp.Action) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, Patience)
	defer cancel()
	if err := chromedp.Run(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v", what, err)
	}
}

// waitState waits until the widget's public-state or staff-state line is in
// state (loading, ok, error, idle) and its text contains text.
func (p *page) waitState(line, state, text string) {
	p.t.Helper()
	js := fmt.Sprintf(`(() => { const e = document.querySelector('[data-sg=%s]');
		return !!e && e.dataset.state === %q && e.textContent.includes(%q); })()`, line, state, text)
	ctx, cancel := context.WithTimeout(p.ctx, Patience)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.Poll(js, nil, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
		p.t.Fatalf("waiting for %s %s with %q: %v; the widget shows %+v", line, state, text, err, p.view())
	}
}

// typeKey types k into the staff part and presses its button.
func (p *page) typeKey(k string) {
	p.t.Helper()
	p.run("typing the key",
		chromedp.SendKeys(`[data-sg=key]`, k, chromedp.ByQuery),
		chromedp.Click(`[data-sg=connect] button[type=submit]`, chromedp.ByQuery))
}

// widgetView is what the widget shows.
type widgetView struct {
	PublicState, PublicText string
	Online, TPS, Discord    string
	Players                 []string
	Hidden                  string
	HiddenShown             bool
	StaffState, StaffText   string
	Server                  []string // dt and dd texts, in order
	ServerShown             bool
	Bans                    []string
	BansShown               bool
	KeyField                string // the input's value
	CanForget               bool
}

func (p *page) view() widgetView {
	p.t.Helper()
	const js = `(() => {
		const q = s => document.querySelector(s), txt = s => q(s) ? q(s).textContent : "";
		const all = s => [...document.querySelectorAll(s)].map(e => e.textContent);
		return {
			PublicState: q('[data-sg=public-state]').dataset.state, PublicText: txt('[data-sg=public-state]'),
			Online: txt('[data-sg=online]'), TPS: txt('[data-sg=tps]'), Discord: txt('[data-sg=discord]'),
			Players: all('[data-sg=players] li'), Hidden: txt('[data-sg=hidden]'), HiddenShown: !q('[data-sg=hidden]').hidden,
			StaffState: q('[data-sg=staff-state]').dataset.state, StaffText: txt('[data-sg=staff-state]'),
			Server: all('[data-sg=server] dt, [data-sg=server] dd'), ServerShown: !q('[data-sg=server]').hidden,
			Bans: all('[data-sg=bans] li'), BansShown: !q('[data-sg=bans]').hidden,
			KeyField: q('[data-sg=key]').value, CanForget: !q('[data-sg=forget]').disabled,
		};
	})()`
	var v widgetView
	ctx, cancel := context.WithTimeout(p.ctx, Patience)
	defer cancel()
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, &v)); err != nil {
		p.t.Fatalf("reading the widget: %v", err)
	}
	return v
}

// noExceptions fails the test if the page threw an uncaught exception.
func (p *page) noExceptions() {
	p.t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range p.exceptions {
		p.t.Errorf("uncaught exception in the page: %s", e)
	}
}

// simView is what the simulated server says, read from it directly: the
// widget must show the same.
type simView struct {
	online      []string // UUIDs
	names       []string // of the online players, sorted
	tps         string   // 1m, two decimals
	motd        string
	bans        []string // banned players' names
	hiddenFound map[string][]string
}

func readSim(t *testing.T, respond func(*url.URL) (int, []byte)) simView {
	t.Helper()
	get := func(path string, v any) {
		t.Helper()
		status, body := respond(&url.URL{Path: path})
		if status != 200 {
			t.Fatalf("sim %s: %d %s", path, status, body)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("sim %s: %v", path, err)
		}
	}
	var sv simView
	var st struct {
		Data struct{ Online []string }
	}
	get("/api/v1/status", &st)
	sv.online = st.Data.Online
	for _, u := range sv.online {
		var pl struct{ Data struct{ Name string } }
		get("/api/v1/player/"+u, &pl)
		sv.names = append(sv.names, pl.Data.Name)
	}
	slices.Sort(sv.names)
	var perf struct {
		Data struct{ TPS map[string]float64 }
	}
	get("/api/v1/performance", &perf)
	sv.tps = fmt.Sprintf("%.2f", perf.Data.TPS["1m"])
	var srv struct{ Data struct{ Motd string } }
	get("/api/v1/server", &srv)
	sv.motd = srv.Data.Motd
	var bans struct {
		Data struct {
			Players struct{ Entries []struct{ Name string } }
		}
	}
	get("/api/v1/bans", &bans)
	for _, b := range bans.Data.Players.Entries {
		sv.bans = append(sv.bans, b.Name)
	}
	if len(sv.names) < 2 || len(sv.bans) == 0 || sv.motd == "" {
		t.Fatalf("the simulated server is too empty for the test: %+v", sv)
	}
	return sv
}

// The gateway's config in the widget tests: the demo's (Caddyfile.example).
var widgetGateway = []string{
	"key " + KeyA,
	"cache performance 2s", // streamed, as in Caddyfile.example
	"require_key performance off",
	"protected_fields performance memory jvm",
	"protected_fields player op banned chatplatform discord rank",
}

// protectedOf are the fields an anonymous caller must never get, by endpoint.
var protectedOf = map[string][]string{
	"player":      {"op", "banned", "chatplatform", "discord", "rank"},
	"performance": {"memory", "jvm"},
}

// wantSeenAnyOrder is backend.wantSeen for requests the page sends
// concurrently.
func wantSeenAnyOrder(t *testing.T, be *Backend, what string, uris ...string) {
	t.Helper()
	var got []string
	for _, s := range be.Take() {
		got = append(got, s.Method+" "+s.RequestURI)
	}
	var want []string
	for _, u := range uris {
		want = append(want, "GET "+u)
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: the backend got %q, want %q", what, got, want)
	}
}

// streamed are the paths the widget streams: their polls reach the backend
// whenever the answer's cache time says, and a public answer may come from
// the cache.
var streamed = []string{"/api/v1/status", "/api/v1/performance"}

// wantSeenDistinct is wantSeenAnyOrder for a page with streams open: the
// distinct request URIs since the last take, the streamed ones when
// uris names them, or whether they came or not.
func wantSeenDistinct(t *testing.T, be *Backend, what string, uris ...string) {
	t.Helper()
	var got []string
	for _, s := range be.Take() {
		if slices.Contains(streamed, s.RequestURI) && !slices.Contains(uris, s.RequestURI) {
			continue
		}
		got = append(got, s.Method+" "+s.RequestURI)
	}
	var want []string
	for _, u := range uris {
		want = append(want, "GET "+u)
	}
	slices.Sort(got)
	got = slices.Compact(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("%s: the backend got %q, want %q", what, got, want)
	}
}

// openStreams are the paths of the page's EventSource calls that are under
// way, sorted.
func (p *page) openStreams() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.calls {
		if c.kind == network.ResourceTypeEventSource && !c.done && c.failure == "" && c.status == 200 {
			out = append(out, strings.TrimPrefix(c.url, GatewayURL))
		}
	}
	slices.Sort(out)
	return out
}

// endpointOf is the endpoint name of an API URL the page called.
func endpointOf(t *testing.T, u string) string {
	t.Helper()
	rest, ok := strings.CutPrefix(u, GatewayURL+"/api/v1/")
	if !ok {
		t.Fatalf("the page called %s", u)
	}
	name, _, _ := strings.Cut(rest, "/")
	return name
}

// TestWidget loads examples/widget in headless Chromium from its own origin
// against a real gateway in front of the simulated server, and checks what it
// shows and what went over the wire: the public part, the staff part with a
// right and a wrong key, refusals, a slow, failing and unreachable API, and
// what a script on another origin can read.
func TestWidget(t *testing.T) {
	needBrowser(t)
	be := NewBackend(t)
	be.Respond = simulated(t)
	want := readSim(t, be.Respond)
	dir := t.TempDir()
	Gateway{Upstream: be.Addr(), Statusgate: widgetGateway, Sites: []string{widgetSite(t, dir)}}.Start(t)

	t.Run("public part and staff part", func(t *testing.T) {
		p := openPage(t, widgetPage(t, dir, "main", GatewayURL, `data-refresh="3600"`))
		p.waitState("public-state", "ok", "Updated")
		v := p.view()
		if v.Online != fmt.Sprint(len(want.online)) || !slices.Equal(v.Players, want.names) || v.TPS != want.tps {
			t.Errorf("public part shows %s online %q, TPS %s; want %d %q, %s", v.Online, v.Players, v.TPS, len(want.online), want.names, want.tps)
		}
		if wantHidden := "Hidden from visitors without a key: performance: memory, jvm; player: op, banned, discord, rank."; !v.HiddenShown || v.Hidden != wantHidden {
			t.Errorf("hidden fields: shown %v, %q; want %q", v.HiddenShown, v.Hidden, wantHidden)
		}
		if v.StaffState != "idle" || v.ServerShown || v.BansShown {
			t.Errorf("staff part before a key: %+v", v)
		}

		// What the page got anonymously: every call cross-origin without a
		// key, no preflight, and no protected field anywhere in a body.
		var got []string
		for _, c := range p.apiCalls() {
			got = append(got, c.method+" "+strings.TrimPrefix(c.url, GatewayURL))
			if c.kind != network.ResourceTypeFetch || c.status != 200 || c.header["X-API-Key"] != nil {
				t.Errorf("anonymous call %s %s: %s, status %d, headers %v", c.method, c.url, c.kind, c.status, c.header)
				continue
			}
			body := p.body(c)
			names := MemberNames(t, body)
			for _, f := range protectedOf[endpointOf(t, c.url)] {
				if names[f] {
					t.Errorf("%s: the page got the protected field %q: %s", c.url, f, Clip(body))
				}
			}
			if m := Meta(t, body); m["authenticated"] != false {
				t.Errorf("%s: meta.authenticated %v", c.url, m["authenticated"])
			}
		}
		// status and performance come as streams, which stay open: only the
		// name look-ups are finished calls.
		var wantCalls []string
		for _, u := range want.online {
			wantCalls = append(wantCalls, "GET /api/v1/player/"+u)
		}
		slices.Sort(got)
		slices.Sort(wantCalls)
		if !slices.Equal(got, wantCalls) {
			t.Errorf("the page called\n%q, want\n%q", got, wantCalls)
		}
		if streams := p.openStreams(); !slices.Equal(streams, []string{"/api/v1/performance", "/api/v1/status"}) {
			t.Errorf("the page's open streams: %q", streams)
		}
		backendWant := []string{"/api/v1/status", "/api/v1/performance"}
		for _, c := range wantCalls {
			backendWant = append(backendWant, strings.TrimPrefix(c, "GET "))
		}
		wantSeenDistinct(t, be, "public part", backendWant...)

		// The staff part: the key in a header, after a preflight, and the
		// keyed answers carry what the anonymous ones lacked.
		p.typeKey(KeyA)
		p.waitState("staff-state", "ok", "Key accepted")
		v = p.view()
		if !v.ServerShown || !slices.Contains(v.Server, "MOTD") || !slices.Contains(v.Server, want.motd) || !slices.Contains(v.Server, "Memory") {
			t.Errorf("server details: shown %v, %q; want the MOTD %q and memory", v.ServerShown, v.Server, want.motd)
		}
		for _, name := range want.bans {
			if !slices.ContainsFunc(v.Bans, func(s string) bool { return strings.HasPrefix(s, name+" ") }) {
				t.Errorf("bans %q lack %s", v.Bans, name)
			}
		}
		if v.KeyField != "" || !v.CanForget {
			t.Errorf("after the key: field %q, forget button enabled %v", v.KeyField, v.CanForget)
		}
		keyed := map[string]bool{}
		preflights := map[string]bool{}
		for _, c := range p.apiCalls() {
			ep := endpointOf(t, c.url)
			switch {
			case c.method == "OPTIONS": // Chromium reports preflights as type Other
				preflights[ep] = c.status == 204 && c.header["Access-Control-Request-Headers"] == "x-api-key" &&
					c.header["Access-Control-Request-Method"] == "GET" && c.header["Origin"] == WidgetOrigin
			case c.header["X-API-Key"] == KeyA:
				keyed[ep] = c.status == 200
				if m := Meta(t, p.body(c)); m["authenticated"] != true {
					t.Errorf("%s with the key: meta.authenticated %v", c.url, m["authenticated"])
				}
			}
		}
		for _, ep := range []string{"server", "performance", "bans"} {
			if !keyed[ep] || !preflights[ep] {
				t.Errorf("%s: keyed call ok %v, preflight ok %v", ep, keyed[ep], preflights[ep])
			}
		}
		wantSeenDistinct(t, be, "staff", "/api/v1/server", "/api/v1/performance", "/api/v1/bans")

		// The key is in the script's memory only.
		var stored string
		p.run("looking for the key", chromedp.Evaluate(`JSON.stringify([localStorage.length, sessionStorage.length, document.cookie, location.href, document.documentElement.outerHTML.includes(`+JSONString(KeyA)+`)])`, &stored))
		if want := `[0,0,"",` + JSONString(WidgetOrigin+"/page-main.html") + `,false]`; stored != want {
			t.Errorf("storage, cookie, URL, DOM: %s, want %s", stored, want)
		}
		p.run("forgetting the key", chromedp.Click(`[data-sg=forget]`, chromedp.ByQuery))
		p.waitState("staff-state", "idle", "Key forgotten")
		if v := p.view(); v.ServerShown || v.BansShown || v.CanForget {
			t.Errorf("after Forget: %+v", v)
		}
		p.noExceptions()
	})

	t.Run("wrong key", func(t *testing.T) {
		p := openPage(t, widgetPage(t, dir, "wrongkey", GatewayURL, `data-refresh="3600"`))
		p.waitState("public-state", "ok", "Updated")
		be.Take()
		p.typeKey(BadKey)
		p.waitState("staff-state", "error", "Refused: 404 Not found (/api/v1/server): the key was not accepted")
		v := p.view()
		if !strings.Contains(v.StaffText, "The key has been dropped") || v.ServerShown || v.BansShown || v.CanForget || v.KeyField != "" {
			t.Errorf("after a wrong key: %+v", v)
		}
		// Nothing but the public endpoints' polls reached the backend (the
		// wrong key's performance is the public one, from the cache); the
		// refusals are the gateway's.
		wantSeenDistinct(t, be, "wrong key")
		p.noExceptions()
	})

	t.Run("refusals, slow and failing API", func(t *testing.T) {
		be.Misbehave(SendTooMany)
		defer be.Misbehave(Behave)
		p := openPage(t, widgetPage(t, dir, "failing", GatewayURL, `data-refresh="1" data-timeout="1"`))
		// 429: the envelope, and Retry-After, which the script can read only
		// because the gateway exposes it.
		// The backend's 429 comes as an event: its envelope, which names
		// the wait.
		p.waitState("public-state", "error", "429 Too many requests, retry in 7s (/api/v1/status): too many requests")
		be.Misbehave(SendHTML)
		p.waitState("public-state", "error", "502 Bad gateway (/api/v1/status): the game server did not answer the gateway")
		be.Misbehave(Behave)
		p.waitState("public-state", "ok", "Updated")
		if v := p.view(); !slices.Equal(v.Players, want.names) {
			t.Errorf("after recovering: players %q, want %q", v.Players, want.names)
		}
		p.noExceptions()
		be.Take()
	})

	t.Run("API unreachable", func(t *testing.T) {
		p := openPage(t, widgetPage(t, dir, "down", "http://"+ClosedPort(t), `data-refresh="1" data-timeout="2"`))
		p.waitState("public-state", "error", "The API cannot be reached")
		p.typeKey(KeyA)
		p.waitState("staff-state", "error", "The API cannot be reached")
		if v := p.view(); v.Online != "–" || len(v.Players) != 0 || !v.CanForget {
			t.Errorf("with the API down: %+v", v)
		}
		p.noExceptions()
	})

	t.Run("what a script on another origin can do", func(t *testing.T) {
		p := openPage(t, widgetPage(t, dir, "probe", GatewayURL, `data-staff="off" data-refresh="3600"`))
		p.waitState("public-state", "ok", "Updated")
		const probe = `(async (api, key) => {
			const out = {};
			const tryFetch = async (path, init) => {
				try { const r = await fetch(api + path, init); return String(r.status); }
				catch (e) { return e.name; }
			};
			let r = await fetch(api + "/api/v1/status");
			out.readable = [...r.headers.keys()];
			out.withCredentials = await tryFetch("/api/v1/status", {credentials: "include"});
			out.withoutCredentials = await tryFetch("/api/v1/status", {credentials: "omit"});
			r = await fetch(api + "/api/v1/server", {headers: {"X-API-Key": key}});
			out.keyed = r.status + " " + (await r.json()).meta.authenticated;
			out.otherHeader = await tryFetch("/api/v1/status", {headers: {"X-Requested-With": "fetch"}});
			out.post = await tryFetch("/api/v1/status", {method: "POST", body: "x"});
			out.delete = await tryFetch("/api/v1/status", {method: "DELETE"});
			out.notAPI = await tryFetch("/favicon.ico");
			return JSON.stringify(out);
		})(%s, %s)`
		run := func() map[string]any {
			t.Helper()
			var s string
			p.run("probe", chromedp.Evaluate(fmt.Sprintf(probe, JSONString(GatewayURL), JSONString(KeyA)), &s,
				func(e *runtime.EvaluateParams) *runtime.EvaluateParams { return e.WithAwaitPromise(true) }))
			var m map[string]any
			if err := json.Unmarshal([]byte(s), &m); err != nil {
				t.Fatal(err)
			}
			return m
		}
		be.Take()
		got := run()
		want := map[string]any{
			// The safelisted headers, and nothing else of a 200: no Date,
			// Server or X-Content-Type-Options.
			"readable":           []any{"cache-control", "content-length", "content-type"},
			"withCredentials":    "TypeError", // "*" refuses credentials mode
			"withoutCredentials": "200",
			"keyed":              "200 true",  // X-API-Key passes the preflight
			"otherHeader":        "TypeError", // any other header does not
			"post":               "405",       // no preflight for a simple POST: the gateway's 405, readable
			"delete":             "TypeError", // refused by the preflight, never sent
			"notAPI":             "404",       // the gateway's 404 outside /api is readable too
		}
		for k, w := range want {
			if g := got[k]; fmt.Sprint(g) != fmt.Sprint(w) {
				t.Errorf("%s: %v, want %v", k, g, w)
			}
		}
		// Only the GETs the gateway allowed reached the backend; the one with
		// credentials too: the browser sends it and hides the answer.
		// (The page's own status stream polls too: status is counted apart.)
		var seen []string
		statusSeen := 0
		for _, r := range be.Take() {
			if r.RequestURI == "/api/v1/status" {
				statusSeen++
				continue
			}
			seen = append(seen, r.RequestURI)
		}
		if !slices.Equal(seen, []string{"/api/v1/server"}) || statusSeen < 3 {
			t.Errorf("probe: the backend got %q and %d of status, want server and at least 3 of status", seen, statusSeen)
		}

		be.Misbehave(SendTooMany)
		defer be.Misbehave(Behave)
		var ra string
		p.run("Retry-After", chromedp.Evaluate(fmt.Sprintf(`(async () => { const r = await fetch(%s + "/api/v1/status");
			return r.status + " " + r.headers.get("Retry-After") + " " + [...r.headers.keys()].join(","); })()`, JSONString(GatewayURL)), &ra,
			func(e *runtime.EvaluateParams) *runtime.EvaluateParams { return e.WithAwaitPromise(true) }))
		if ra != "429 7 cache-control,content-length,content-type,retry-after" {
			t.Errorf("a 429 as the script sees it: %q", ra)
		}
		p.noExceptions()
		be.Take()
	})
}

// TestWidgetLive watches a player join the simulated server: the page shows
// the new count and name without a reload, from its stream. The gateway has
// the demo's limits (max_per_client 4, max_streams_per_client 4): two tabs
// of the widget from one address trip none of them (every call they made
// was answered 200); a third tab's streams are refused, which it says
// (429, and when to try again), and it shows the server as soon as a tab
// closes.
func TestWidgetLive(t *testing.T) {
	needBrowser(t)
	be := NewBackend(t)
	sim := simulated(t)
	want := readSim(t, sim)
	var joined atomic.Bool
	// Who joins: a player of the sim's roster who is not online.
	newcomer, newName := "", ""
	for _, u := range []string{"8b1e62a0-5c1d-4f0b-9a77-2f3c9d0e6b21", "1c9e0a44-7b0d-4a9e-8f21-3e5d6c7b8a90", "40094f2f-ca8f-4826-8b31-11e0f4c449df"} {
		if !slices.Contains(want.online, u) {
			var pl struct{ Data struct{ Name string } }
			if _, body := sim(&url.URL{Path: "/api/v1/player/" + u}); json.Unmarshal(body, &pl) == nil && pl.Data.Name != "" {
				newcomer, newName = u, pl.Data.Name
				break
			}
		}
	}
	if newcomer == "" {
		t.Fatalf("every named player of the sim is online: %q", want.online)
	}
	be.Respond = func(u *url.URL) (int, []byte) {
		status, body := sim(u)
		if u.Path == "/api/v1/status" && joined.Load() {
			var env map[string]any
			if err := json.Unmarshal(body, &env); err != nil {
				t.Error(err)
				return status, body
			}
			d := env["data"].(map[string]any)
			d["online"] = append(d["online"].([]any), newcomer)
			d["minecraft"] = d["minecraft"].(float64) + 1
			body, _ = json.Marshal(env)
		}
		return status, body
	}
	dir := t.TempDir()
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: append(slices.Clip(widgetGateway), "max_per_client 4", "max_streams_per_client 4"),
		Sites: []string{widgetSite(t, dir)}}.Start(t)
	target := widgetPage(t, dir, "live", GatewayURL, `data-refresh="3600"`)
	pages := []*page{openPage(t, target), openPage(t, target)}
	for _, p := range pages {
		p.waitState("public-state", "ok", "Updated")
	}
	p := pages[0]
	if v := p.view(); v.Online != fmt.Sprint(len(want.online)) || !slices.Equal(v.Players, want.names) {
		t.Fatalf("before: %s online %q, want %d %q", v.Online, v.Players, len(want.online), want.names)
	}
	joined.Store(true)
	names := slices.Sorted(slices.Values(append(slices.Clone(want.names), newName)))
	js := fmt.Sprintf(`document.querySelector('[data-sg=online]').textContent === %q &&
		[...document.querySelectorAll('[data-sg=players] li')].map(e => e.textContent).join("|") === %q`,
		fmt.Sprint(len(want.online)+1), strings.Join(names, "|"))
	for i, p := range pages {
		ctx, cancel := context.WithTimeout(p.ctx, Patience)
		if err := chromedp.Run(ctx, chromedp.Poll(js, nil, chromedp.WithPollingInterval(50*time.Millisecond))); err != nil {
			t.Fatalf("page %d: the join did not show: %v; it shows %+v", i, err, p.view())
		}
		cancel()
	}
	for i, p := range pages {
		if streams := p.openStreams(); !slices.Equal(streams, []string{"/api/v1/performance", "/api/v1/status"}) {
			t.Errorf("page %d: open streams %q", i, streams)
		}
		for _, c := range p.apiCalls() {
			if c.status != 200 {
				t.Errorf("page %d: %s %s answered %d %s", i, c.method, c.url, c.status, c.failure)
			}
		}
		p.noExceptions()
	}

	third := openPage(t, target)
	third.waitState("public-state", "error", "429 Too many requests (/api/v1/status): too many requests; retry in 1 s")
	if v := third.view(); v.Online != "–" {
		t.Errorf("the refused tab shows %s online", v.Online)
	}
	if err := chromedp.Run(pages[0].ctx, cdpage.Close()); err != nil {
		t.Fatal(err)
	}
	third.waitState("public-state", "ok", "Updated")
	if v := third.view(); v.Online != fmt.Sprint(len(want.online)+1) {
		t.Errorf("the third tab, once a seat was free: %s online", v.Online)
	}
	third.noExceptions()
}

// TestWidgetTellsWhatIsHidden: the widget shows what the gateway's answers
// say, and no more. With protected_fields status online the count stays and
// the list is named as hidden, in the players' list and in the hidden line
// (before, it showed "7 online" over "Nobody is online." and left online
// out of the hidden line); and the network view (data-view="network") shows
// every server's count and the total of /network, the players' lists named
// as hidden.
func TestWidgetTellsWhatIsHidden(t *testing.T) {
	needBrowser(t)
	dir := t.TempDir()
	public := func(p *page) (online, middle string, list []string, hidden string) {
		t.Helper()
		const js = `(() => {
			const txt = s => (document.querySelector(s) || {}).textContent || "";
			return [txt('[data-sg=online]'), txt('[data-sg=tps]') + txt('[data-sg=servers]'),
				[...document.querySelectorAll('.sg-public ul li')].map(e => e.textContent), txt('[data-sg=hidden]')];
		})()`
		var v []any
		p.run("reading the widget", chromedp.Evaluate(js, &v))
		for _, item := range v[2].([]any) {
			list = append(list, item.(string))
		}
		return v[0].(string), v[1].(string), list, v[3].(string)
	}

	t.Run("the list of players hidden", func(t *testing.T) {
		be := NewBackend(t)
		be.Respond = simulated(t)
		want := readSim(t, be.Respond)
		Gateway{Upstream: be.Addr(), Statusgate: append(slices.Clone(widgetGateway), "protected_fields status online"), Sites: []string{widgetSite(t, dir)}}.Start(t)
		p := openPage(t, widgetPage(t, dir, "unlisted", GatewayURL, `data-refresh="3600"`))
		p.waitState("public-state", "ok", "Updated")
		online, tps, list, hidden := public(p)
		if online != fmt.Sprint(len(want.online)) || tps != want.tps {
			t.Errorf("the tiles: %s online, TPS %s; want %d, %s", online, tps, len(want.online), want.tps)
		}
		if !slices.Equal(list, []string{"Who is online is hidden from visitors without a key."}) {
			t.Errorf("the players' list says %q", list)
		}
		if wantHidden := "Hidden from visitors without a key: performance: memory, jvm; status: online."; hidden != wantHidden {
			t.Errorf("the hidden line: %q, want %q", hidden, wantHidden)
		}
		for _, c := range p.apiCalls() {
			if endpointOf(t, c.url) == "player" {
				t.Errorf("the page looked up a player it cannot know: %s", c.url)
			}
		}
		p.noExceptions()
	})

	t.Run("the network view", func(t *testing.T) {
		ms := NewSimMembers(t, "survival", "lobby", "creative")
		g := NetworkGateway(ms, nil, "key "+KeyA, "require_key network off", "protected_fields network players")
		g.Sites = append(g.Sites, widgetSite(t, dir))
		g.Start(t)
		doc := ReadNetwork(t, Send(t, "GET", "/api/v1/network", WithKey(KeyA)))
		var wantList []string
		for _, s := range doc.Data.Servers {
			wantList = append(wantList, fmt.Sprintf("%s %d online", s.Server, s.Online))
		}
		if len(wantList) != 3 || doc.Data.TotalOnline == 0 {
			t.Fatalf("the network is too empty for the test: %+v", doc.Data)
		}
		p := openPage(t, widgetPage(t, dir, "network", GatewayURL, `data-view="network" data-staff="off" data-refresh="3600"`))
		p.waitState("public-state", "ok", "Updated")
		online, servers, list, hidden := public(p)
		if online != fmt.Sprint(doc.Data.TotalOnline) || servers != "3" || !slices.Equal(list, wantList) {
			t.Errorf("the network view: %s online, %s servers, %q; want %d, 3, %q", online, servers, list, doc.Data.TotalOnline, wantList)
		}
		if wantHidden := "Hidden from visitors without a key: network: players."; hidden != wantHidden {
			t.Errorf("the hidden line: %q, want %q", hidden, wantHidden)
		}
		if streams := p.openStreams(); !slices.Equal(streams, []string{"/api/v1/network"}) {
			t.Errorf("the page's open streams: %q, want the network's alone", streams)
		}
		p.noExceptions()
	})
}
