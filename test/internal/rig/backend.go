package rig

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Data the backend serves.
const (
	Alex      = "40094f2f-ca8f-4826-8b31-11e0f4c449df"
	Steve     = "8b1e62a0-5c1d-4f0b-9a77-2f3c9d0e6b21"
	WorldSeed = "-4172144997902289642" // beyond float64's exact range
	DiscordID = "298765432109876543"   // only ever inside a protected member
	UpdatedAt = "1784300000000"
)

// PlayerN is the path of a player of its own for each n: requests that the
// backend must get apart (a query the endpoint does not read reaches it as
// one request).
func PlayerN(n int) string { return fmt.Sprintf("/api/v1/player/40094f2f-ca8f-4826-8b31-%012d", n) }

// Misbehaviour switches the backend from the plugin's behaviour to a failure.
type Misbehaviour int32

const (
	Behave         Misbehaviour = iota
	SendHTML                    // 200 text/html, as the plugin's HTML pages
	SendGzip                    // gzip body with Content-Encoding: gzip, whatever was asked for
	SendTruncated               // JSON that stops in the middle, with a clean end of the response
	SendCutShort                // Content-Length promises more than comes; the connection closes
	SendEarlyError              // 100 KB of valid JSON with protected members, then a syntax error
	SendLateError               // 1 MB of the same, then a syntax error: past the gateway's hold-back
	SendDeep                    // 200,000 '[' deep
	SendSlow                    // the response headers come after 1.5 s
	sendHeld                    // the response headers come when the test calls Release (HoldAnswers)
	SendBig                     // a valid player record of more than 256 KiB after filtering
	SendMetaFirst               // the envelope with meta before data
	SendTooMany                 // the plugin's 429 envelope with Retry-After: 7
	SendUTF7                    // the JSON as Content-Type: application/json; charset=utf-7
	SendTwoTypes                // a second Content-Type, text/html, after the plugin's
	SendBareJSON                // Content-Type: application/json and no other header
)

// Backend stands in for the ServerAPI plugin with its own auth off: GET only
// (405 JSON otherwise), the plugin's envelope and JSON headers, representative
// data per endpoint, 404 envelopes for the rest. It records every request that
// reaches it.
type Backend struct {
	srv  *httptest.Server
	mode atomic.Int32
	// Respond routes a canonical request when it is set before the first
	// request; otherwise backendResponse does.
	Respond func(*url.URL) (int, []byte)

	Mu   sync.Mutex
	seen []SeenRequest // since the last take
	All  []SeenRequest // during the whole test
	// held is closed by release: the answers sendHeld holds go.
	held chan struct{}
}

type SeenRequest struct {
	Method           string
	RequestURI       string
	Header           http.Header
	Trailer          http.Header // after the body was read
	Body             []byte
	ContentLength    int64
	TransferEncoding []string
}

// NewBackend starts a backend for the test. When the test ends it checks what
// must hold for every request that ever reached it (checkInvariants).
func NewBackend(t *testing.T) *Backend {
	be := &Backend{}
	be.srv = httptest.NewServer(be)
	t.Cleanup(func() {
		be.srv.Close()
		be.checkInvariants(t)
	})
	return be
}

func (be *Backend) Addr() string { return be.srv.Listener.Addr().String() }

func (be *Backend) Misbehave(m Misbehaviour) { be.mode.Store(int32(m)) }

// HoldAnswers makes the backend hold every answer, the response headers
// included, until release: a request is at the backend for as long as the
// test needs, however slow the machine, where sendSlow's 1.5 s may be over
// before the test's next request arrives.
func (be *Backend) HoldAnswers() {
	be.Mu.Lock()
	be.held = make(chan struct{})
	be.Mu.Unlock()
	be.Misbehave(sendHeld)
}

// Release lets the held answers go, and the backend behave from now on.
func (be *Backend) Release() {
	be.Misbehave(Behave)
	be.Mu.Lock()
	defer be.Mu.Unlock()
	if be.held != nil {
		close(be.held)
		be.held = nil
	}
}

// AtBackend is how many requests reached the backend since the last Take.
func (be *Backend) AtBackend() int {
	be.Mu.Lock()
	defer be.Mu.Unlock()
	return len(be.seen)
}

// Take returns the requests that reached the backend since the last Take.
func (be *Backend) Take() []SeenRequest {
	be.Mu.Lock()
	defer be.Mu.Unlock()
	s := be.seen
	be.seen = nil
	return s
}

// WantSeen asserts that exactly the GET requests with these request URIs reached
// the backend since the last Take, in this order.
func (be *Backend) WantSeen(t testing.TB, what string, uris ...string) []SeenRequest {
	t.Helper()
	seen := be.Take()
	var got []string
	for _, s := range seen {
		got = append(got, s.Method+" "+s.RequestURI)
	}
	var want []string
	for _, u := range uris {
		want = append(want, "GET "+u)
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: the backend got %q, want %q", what, got, want)
	}
	return seen
}

// checkInvariants asserts, for every request that reached the backend during the
// test: GET, a canonical /api/v1/ path without empty, '.' or '..' segments in
// any spelling, no key in a header or the query, no client-supplied real-IP
// header, no body and no trailers, and none of the test keys anywhere.
func (be *Backend) checkInvariants(t *testing.T) {
	be.Mu.Lock()
	defer be.Mu.Unlock()
	for _, s := range be.All {
		uri := s.RequestURI
		path, query, _ := strings.Cut(uri, "?")
		if s.Method != http.MethodGet || !strings.HasPrefix(path, "/api/v1/") {
			t.Errorf("backend got %s %s", s.Method, uri)
		}
		for _, seg := range strings.Split(path, "/")[1:] {
			dec, err := url.PathUnescape(seg)
			if err != nil || dec == "" || dec == "." || dec == ".." || strings.ContainsAny(dec, "/\\") {
				t.Errorf("backend got the segment %q in %s", seg, uri)
			}
		}
		for _, pair := range strings.Split(query, "&") {
			name, _, _ := strings.Cut(pair, "=")
			if dec, err := url.QueryUnescape(name); err == nil && dec == "key" {
				t.Errorf("backend got a key query parameter: %s", uri)
			}
		}
		for _, h := range []string{"X-Api-Key", "Cf-Connecting-Ip", "True-Client-Ip", "X-Real-Ip"} {
			if v, ok := s.Header[h]; ok {
				t.Errorf("backend got %s: %q for %s", h, v, uri)
			}
		}
		if len(s.Body) > 0 || len(s.Trailer) > 0 || s.ContentLength != 0 || len(s.TransferEncoding) > 0 {
			t.Errorf("backend got a body for %s: %q, trailers %v, length %d, transfer encoding %q",
				uri, s.Body, s.Trailer, s.ContentLength, s.TransferEncoding)
		}
		for _, k := range secrets {
			if strings.Contains(uri, k) || strings.Contains(FmtHeader(s.Header), k) || strings.Contains(FmtHeader(s.Trailer), k) {
				t.Errorf("backend got the key %q in %s %v", k, uri, s.Header)
			}
		}
	}
}

func (be *Backend) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body) // the trailers come after it
	s := SeenRequest{Method: r.Method, RequestURI: r.RequestURI, Header: r.Header.Clone(), Trailer: r.Trailer.Clone(),
		Body: body, ContentLength: r.ContentLength, TransferEncoding: r.TransferEncoding}
	be.Mu.Lock()
	be.seen = append(be.seen, s)
	be.All = append(be.All, s)
	held := be.held
	be.Mu.Unlock()

	if r.Method != http.MethodGet {
		WriteBackend(w, http.StatusMethodNotAllowed, ErrorEnvelope(405, "Method Not Allowed", r.URL.Path))
		return
	}
	respond := be.Respond
	if respond == nil {
		respond = BackendResponse
	}
	status, body := respond(r.URL)
	switch Misbehaviour(be.mode.Load()) {
	case SendHTML:
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte(`<!doctype html><html><body><h1>Punishments</h1><p>op: Alex_MC</p></body></html>`))
		return
	case SendGzip:
		w.Header().Set("Content-Encoding", "gzip")
		body = gzipped(body)
	case SendTruncated:
		body = body[:len(body)/2]
	case SendCutShort:
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		_, _ = w.Write(body[:len(body)/2])
		w.(http.Flusher).Flush()
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			conn.Close()
		}
		return
	case SendEarlyError:
		body = lateErrorBody(100_000)
	case SendLateError:
		body = lateErrorBody(1_000_000)
	case SendDeep:
		body = append([]byte(`{"ok":true,"data":`), bytes.Repeat([]byte("["), 200_000)...)
	case SendSlow:
		select {
		case <-time.After(1500 * time.Millisecond):
		case <-r.Context().Done():
			return
		}
	case sendHeld:
		if held != nil {
			select {
			case <-held:
			case <-r.Context().Done():
				return
			}
		}
	case SendBig:
		body = BigPlayerBody()
	case SendMetaFirst:
		body = MetaFirst(body)
	case SendUTF7, SendTwoTypes, SendBareJSON:
		h := w.Header()
		switch Misbehaviour(be.mode.Load()) {
		case SendUTF7:
			h.Set("Content-Type", "application/json; charset=utf-7")
		case SendTwoTypes:
			h["Content-Type"] = []string{"application/json; charset=utf-8", "text/html"}
		case SendBareJSON:
			h.Set("Content-Type", "application/json")
		}
		h.Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	case SendTooMany:
		w.Header().Set("Retry-After", "7")
		status, body = http.StatusTooManyRequests, ErrorEnvelope(http.StatusTooManyRequests, "Too many requests, retry in 7s", r.URL.Path)
	}
	WriteBackend(w, status, body)
}

// WriteBackend sends a body with the plugin's JSON headers.
func WriteBackend(w http.ResponseWriter, status int, body []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// BackendBody is the body the well-behaved backend sends for a canonical target.
func BackendBody(target string) []byte {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		panic(err)
	}
	_, body := BackendResponse(u)
	return body
}

// Envelope wraps data like the plugin does.
func Envelope(data string) []byte {
	return []byte(`{"ok":true,"data":` + data + `,"meta":{"version":"v1","server":"global","updatedAt":` + UpdatedAt + `,"authenticated":true}}`)
}

func ErrorEnvelope(status int, message, path string) []byte {
	return []byte(fmt.Sprintf(`{"ok":false,"error":{"status":%d,"message":%s,"path":%s},"meta":{"version":"v1","updatedAt":%s}}`,
		status, JSONString(message), JSONString(path), UpdatedAt))
}

// stations is the data of the endpoints whose answer depends on nothing.
var stations = map[string]string{
	"server": `{"brand":"Paper","maxPlayers":50,"motd":"Welcome to Emerald SMP","version":"26.1.2-72-3f1c2ab (MC: 26.1.2)",` +
		`"bukkitVersion":"26.1.2-R0.1-SNAPSHOT","minecraftVersion":"26.1.2","port":25565,"ip":null,"onlineMode":true,` +
		`"hardcore":false,"allowFlight":false,"allowNether":true,"allowEnd":true,"defaultGameMode":"SURVIVAL",` +
		`"viewDistance":10,"simulationDistance":8,"spawnRadius":10,"worldCount":3,"pluginCount":27}`,
	"performance": `{"tps":{"1m":19.98,"5m":20.0,"15m":20.0},"averageTickTimeMs":11.42,` +
		`"memory":{"usedBytes":3221225472,"freeBytes":1073741824,"totalBytes":4294967296,"maxBytes":8589934592,"usedMB":3072,"maxMB":8192},` +
		`"jvm":{"javaVersion":"25.0.3","javaVendor":"Eclipse Adoptium","osName":"Linux","osArch":"amd64","availableProcessors":8,"uptimeMs":86400123,"threadCount":74}}`,
	"worlds":      `[` + world("world", "NORMAL") + `,` + world("world_nether", "NETHER") + `]`,
	"gamerules":   `{"world":{"doDaylightCycle":"true","keepInventory":"false","randomTickSpeed":"3"}}`,
	"entities":    `{"world":{"zombie":41,"item":12,"villager":7},"world_nether":{"piglin":30}}`,
	"spawnlimits": `{"monsters":70,"animals":10,"waterAnimals":5,"ticksPerMonsterSpawn":1,"ticksPerAnimalSpawn":400}`,
	"punishments": `{"records":[` + punishment(Steve) + `],"stats":{"bans":1,"mutes":0,"kicks":4}}`,
	"bans":        `[{"uuid":"` + Steve + `","name":"Steve","ip":"203.0.113.7","reason":"griefing","expires":null}]`,
	"operators":   `[{"uuid":"` + Alex + `","name":"Alex_MC","level":4,"bypassesPlayerLimit":false}]`,
	"whitelist":   `{"enabled":true,"enforced":false,"entries":[{"uuid":"` + Alex + `","name":"Alex_MC"}]}`,
	"plugins":     `[{"name":"ServerAPI","version":"1.1.0","enabled":true},{"name":"LuckPerms","version":"5.5.0","enabled":true}]`,
	"network":     `{"servers":[{"name":"lobby","online":3,"op":true},{"name":"survival","online":2}],"total":5}`,
	"constants":   `{"gameModes":["SURVIVAL","CREATIVE","ADVENTURE","SPECTATOR"],"difficulties":["PEACEFUL","EASY","NORMAL","HARD"]}`,
}

func world(name, env string) string {
	return `{"name":"` + name + `","environment":"` + env + `","seed":` + WorldSeed + `,"difficulty":"NORMAL",` +
		`"spawn":{"x":0.5,"y":64.0,"z":-12.0},"borderSize":60000.0,"time":6000,"players":2}`
}

func punishment(uuid string) string {
	return `{"uuid":"` + uuid + `","type":"ban","reason":"griefing","operator":"Alex_MC","start":1784200000000,"end":null}`
}

// player is a player record as the plugin writes it, the chat-platform field
// under its plugin name (discord). With detailed, the statistics carry the
// protected names again at depth: in objects, in arrays, in arrays of arrays,
// under escaped spellings, next to near misses that must stay.
func player(uuid string, detailed bool) string {
	name := `null`
	switch uuid {
	case Alex:
		name = `"Alex_MC"`
	case Steve:
		name = `"Steve"`
	}
	d := `{}`
	if detailed {
		d = `{"mine_block":{"stone":1834,"deepslate":402},"kill_entity":{"zombie":57},` +
			`"sessions":[{"server":"lobby","op":true,"banned":false,"discord":"` + DiscordID + `","ticks":1200},` +
			`[{"o\u0070":true,"keep":1},{"ban\u006eed":true,"disc\u006frd":"` + DiscordID + `"}]],` +
			`"profile":{"linked":{"chatplatform":"` + DiscordID + `","since":1700001234567},"role":"op","opx":1,"OP":2,"op ":3}}`
	}
	return `{"uuid":"` + uuid + `","name":` + name + `,"nickname":"§bAlexie","messagecolor":"#55FF55","nicknamecolor":"#55FFFF",` +
		`"rank":"vip","registry":1700001234567,"offline":null,"playtime":5123400,"afk":false,"balance":1500.0,` +
		`"addons":false,"pass":false,"discord":"` + DiscordID + `","op":true,"banned":false,` +
		`"stat":{"deaths":12,"jump":8841,"play_one_minute":1024668,"walk_one_cm":5432100},"detailed":` + d + `}`
}

// BackendResponse routes a canonical request like the plugin.
func BackendResponse(u *url.URL) (int, []byte) {
	path := u.Path
	q := u.Query()
	rest, ok := strings.CutPrefix(path, "/api/v1/")
	if !ok {
		return 404, ErrorEnvelope(404, "No such endpoint: "+path, path)
	}
	name, param, hasParam := strings.Cut(rest, "/")
	if data, ok := stations[name]; ok && !hasParam {
		return 200, Envelope(data)
	}
	switch name {
	case "status":
		if hasParam {
			break
		}
		data := `{"online":["` + Alex + `","` + Steve + `"],"minecraft":2,"discord":3412`
		if q.Get("history") == "true" {
			data += `,"history":{"last":1784299800000,"online":[2,5,7,4],"discord":[3412,3411,null,3409]}`
		}
		return 200, Envelope(data + `}`)
	case "player":
		if len(param) != 36 || strings.Contains(param, "/") {
			return 404, ErrorEnvelope(404, "Invalid UUID: "+param, path)
		}
		return 200, Envelope(player(strings.ToLower(param), q.Get("detailed") == "true"))
	case "worlds":
		if param == "world" || param == "world_nether" || param == "my world" {
			return 200, Envelope(world(param, "NORMAL"))
		}
		return 404, ErrorEnvelope(404, "World not found: "+param, path)
	case "punishments":
		return 200, Envelope(`{"records":[` + punishment(param) + `]}`)
	case "placeholders":
		return 200, Envelope(`{"uuid":` + JSONString(q.Get("uuid")) + `,"values":{` + JSONString(q.Get("p")) + `:"Alex_MC"}}`)
	case "custom":
		if hasParam && !strings.Contains(param, "/") {
			return 200, Envelope(`{"station":` + JSONString(param) + `,"votes":42,"top":[{"name":"Alex_MC","op":true}]}`)
		}
	}
	return 404, ErrorEnvelope(404, "No such endpoint: "+path, path)
}

// BigSessions is the number of sessions in BigPlayerBody.
const BigSessions = 7000

// BigPlayerBody is a valid player record of about 520 KB, 315 KB after the
// default player fields are removed: more than the gateway's 256 KiB hold-back.
func BigPlayerBody() []byte {
	var b strings.Builder
	b.WriteString(`{"ok":true,"data":{"uuid":"` + Alex + `","name":"Alex_MC","op":true,"sessions":[`)
	for i := range BigSessions {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"server":"s%d","op":%t,"banned":false,"discord":"%s","ticks":%d,"tps":20.0}`, i, i%2 == 0, DiscordID, i*7)
	}
	b.WriteString(`],"seed":` + WorldSeed + `},"meta":{"version":"v1","server":"global","updatedAt":` + UpdatedAt + `,"authenticated":true}}`)
	return []byte(b.String())
}

// lateErrorBody is size bytes of valid JSON full of protected members, then a
// syntax error inside one of them.
func lateErrorBody(size int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"ok":true,"data":{"uuid":"` + Alex + `","sessions":[`)
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, `{"server":"s%d","op":true,"discord":"%s","ticks":%d},`, i, DiscordID, i)
	}
	b.WriteString(`{"server":"late","discord":"` + DiscordID + `","op":tru}]}}`)
	return b.Bytes()
}

// MetaFirst moves the envelope's meta in front of ok and data.
func MetaFirst(body []byte) []byte {
	s := string(body)
	i := strings.LastIndex(s, `,"meta":`)
	return []byte(`{` + s[i+1:len(s)-1] + `,` + s[1:i] + `}`)
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(b)
	_ = zw.Close()
	return buf.Bytes()
}
