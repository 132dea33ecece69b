package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"
)

func TestPairRatios(t *testing.T) {
	got := pairRatios([]float64{100, 0, 200, 50}, []float64{90, 5, 300})
	want := []float64{0.9, 1.5}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Fatalf("pairRatios = %v, want %v", got, want)
	}
	if m := harness.Median(pairRatios([]float64{10, 10, 10}, []float64{9, 20, 8})); m != 0.9 {
		t.Errorf("median ratio = %v, want 0.9", m)
	}
}

// envelope decodes a body and returns its data and meta objects.
func envelope(t *testing.T, b []byte) (data, meta map[string]any) {
	t.Helper()
	v, err := decodeJSON(b)
	if err != nil {
		t.Fatalf("invalid JSON: %v", err)
	}
	doc := v.(map[string]any)
	if doc["ok"] != true {
		t.Fatalf("ok is %v", doc["ok"])
	}
	data, _ = doc["data"].(map[string]any)
	meta, _ = doc["meta"].(map[string]any)
	if data == nil || meta == nil {
		t.Fatalf("no data or meta object in %.100s", b)
	}
	return data, meta
}

func TestFakeBodies(t *testing.T) {
	data, meta := envelope(t, statusBody())
	if meta["authenticated"] != true || len(data["online"].([]any)) == 0 {
		t.Errorf("status body: meta %v data %v", meta, data)
	}
	if n := len(statusBody()); n > 2048 {
		t.Errorf("status body is %d bytes, want a small one", n)
	}

	const want = 200 << 10
	player := fixture.PlayerOfSize(want)
	if n := len(player); n < want*95/100 || n > want*105/100 {
		t.Errorf("player body is %d bytes, want about %d", n, want)
	}
	data, meta = envelope(t, player)
	if meta["authenticated"] != true {
		t.Error("player meta.authenticated is not true")
	}
	for _, name := range protectedNames {
		if _, ok := data[name]; !ok {
			t.Errorf("player data has no %q", name)
		}
	}
	detailed := data["detailed"].(map[string]any)
	if len(detailed) != 8 {
		t.Errorf("detailed has %d categories, want 8", len(detailed))
	}
	for cat, v := range detailed {
		if n := len(v.(map[string]any)); n < 500 {
			t.Errorf("detailed.%s has only %d distinct counters", cat, n)
		}
	}
	if !bytes.Equal(player, fixture.PlayerOfSize(want)) {
		t.Error("player body is not deterministic")
	}
}

func TestBulkBody(t *testing.T) {
	for _, size := range []int64{1 << 20, 3<<20 + 12345, int64(len(playerHead) + len(playerTail) + 9), int64(len(playerHead) + len(playerTail) + 200)} {
		var buf bytes.Buffer
		if err := writeBulk(&buf, size); err != nil {
			t.Fatalf("writeBulk(%d): %v", size, err)
		}
		if int64(buf.Len()) != size {
			t.Errorf("writeBulk(%d) wrote %d bytes", size, buf.Len())
		}
		if !json.Valid(buf.Bytes()) {
			t.Fatalf("writeBulk(%d) is not valid JSON: ...%s", size, buf.Bytes()[max(0, buf.Len()-200):])
		}
		scan, err := scanKeys(&buf, protectedNames)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range protectedNames {
			if scan.Protected[name] == 0 {
				t.Errorf("bulk body of %d bytes has no %q member", size, name)
			}
		}
	}
	if err := writeBulk(io.Discard, 10); err == nil {
		t.Error("writeBulk accepted a size below its minimum")
	}
}

func TestKeyScanner(t *testing.T) {
	doc := `{"ok":true,"op":1,"data":{"role":"op","list":[{"a":[{"o\u0070":1}]},{"banned":"x","opx":2,"OP":3}],` +
		`"s":"\"op\":1","nested":{"discord":{"discord":null}}},"meta":{"op":true,"authenticated":false,"hiddenFields":["op"]}}`
	scan, err := scanKeys(strings.NewReader(doc), protectedNames)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int64{"op": 2, "banned": 1, "discord": 2}
	for name, n := range want {
		if scan.Protected[name] != n {
			t.Errorf("found %q %d times, want %d (all: %v)", name, scan.Protected[name], n, scan.Protected)
		}
	}
	if scan.leaked() != 5 {
		t.Errorf("leaked = %d, want 5", scan.leaked())
	}
	// Outside meta: ok op data role list a o\u0070 banned opx OP s nested discord discord.
	if scan.DataKeys != 14 {
		t.Errorf("DataKeys = %d, want 14", scan.DataKeys)
	}
	if string(scan.Meta) != `{"op":true,"authenticated":false,"hiddenFields":["op"]}` {
		t.Errorf("Meta = %s", scan.Meta)
	}
	if scan.Bytes != int64(len(doc)) {
		t.Errorf("Bytes = %d, want %d", scan.Bytes, len(doc))
	}

	// A planted key in a large document, read in small pieces.
	big := fixture.PlayerOfSize(64 << 10)
	planted := bytes.Replace(big, []byte(`"oak_planks":`), []byte(`"oak_planks":{"x":[{"ban\u006eed":true}]},"y":`), 1)
	scan, err = scanKeys(io.LimitReader(bytes.NewReader(planted), int64(len(planted))), []string{"banned"})
	if err != nil || scan.Protected["banned"] != 2 {
		t.Errorf("planted banned: found %v, err %v", scan.Protected, err)
	}

	for _, bad := range []string{`{"a":{"b":1}`, `{"a":[}`, `{"a":1}}`, `{"a":1} x`, `"op"`, `{"a":"op`} {
		if _, err := scanKeys(strings.NewReader(bad), protectedNames); err == nil {
			t.Errorf("scanKeys(%s) did not fail", bad)
		}
	}
}

func TestChecks(t *testing.T) {
	player := fixture.PlayerOfSize(32 << 10)
	want, err := filteredView(player, protectedNames)
	if err != nil {
		t.Fatal(err)
	}
	good, _ := json.Marshal(want)
	if err := checkFiltered(200, good, player, protectedNames); err != nil {
		t.Errorf("a correct filtered body failed: %v", err)
	}
	if !bytes.Contains(good, []byte(`"hiddenFields":["op","banned","discord"]`)) || !bytes.Contains(good, []byte(`"authenticated":false`)) {
		t.Errorf("filteredView meta: %s", good[len(good)-200:])
	}
	for name, body := range map[string][]byte{
		"backend body":   player,
		"leak":           bytes.Replace(good, []byte(`"uuid":`), []byte(`"op":true,"uuid":`), 1),
		"authenticated":  bytes.Replace(good, []byte(`"authenticated":false`), []byte(`"authenticated":true`), 1),
		"missing member": bytes.Replace(good, []byte(`"rank":"vip",`), nil, 1),
		"number changed": bytes.Replace(good, []byte(`1520.75`), []byte(`1520.750`), 1),
		"truncated":      good[:len(good)-1],
	} {
		if checkFiltered(200, body, player, protectedNames) == nil {
			t.Errorf("checkFiltered accepted a body with %s", name)
		}
	}
	if checkFiltered(502, good, player, protectedNames) == nil {
		t.Error("checkFiltered accepted status 502")
	}
	if checkPassThrough(200, player, player) != nil || checkPassThrough(200, good, player) == nil {
		t.Error("checkPassThrough is wrong")
	}
	// status has no protected fields: only meta.authenticated changes, no hiddenFields.
	sv, _ := filteredView(statusBody(), nil)
	_, meta := envelope(t, must(json.Marshal(sv)))
	if meta["authenticated"] != false || meta["hiddenFields"] != nil || meta["cachedAt"] == nil {
		t.Errorf("status filteredView meta = %v", meta)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestBackend(t *testing.T) {
	status, player := statusBody(), fixture.PlayerOfSize(16<<10)
	b := newBackend(status, player)
	srv := httptest.NewServer(b)
	defer srv.Close()
	get := func(path, key string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if key != "" {
			req.Header.Set("X-API-Key", key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp, body
	}
	if resp, body := get(statusPath, ""); !bytes.Equal(body, status) || resp.Header.Get("Content-Type") != "application/json; charset=utf-8" {
		t.Errorf("status: %s %s", resp.Header, body)
	}
	if _, body := get(playerPath, apiKey); !bytes.Equal(body, player) {
		t.Error("player body differs")
	}
	if resp, body := get(bulkPath(100000), ""); len(body) != 100000 || resp.ContentLength != 100000 || !json.Valid(body) {
		t.Errorf("bulk: %d bytes, Content-Length %d", len(body), resp.ContentLength)
	}
	if resp, _ := get("/api/v1/server", ""); resp.StatusCode != 404 {
		t.Errorf("unknown path: %d", resp.StatusCode)
	}
	if n := b.keySeen.Load(); n != 1 {
		t.Errorf("keySeen = %d, want 1", n)
	}
}

func TestRunRound(t *testing.T) {
	body := []byte(`{"ok":true}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-API-Key") != apiKey {
			w.WriteHeader(http.StatusUnauthorized)
		}
		w.Write(body)
	}))
	defer srv.Close()
	tg := newTarget("test", srv.URL, 4)
	res := runRound(tg, request{path: "/", key: apiKey, wantLen: int64(len(body))}, 4, 200*time.Millisecond)
	if res.requests == 0 || res.failures != 0 || len(res.latencies) != res.requests || res.rps() <= 0 {
		t.Errorf("good round: %d requests, %d failures (%s)", res.requests, res.failures, res.firstFail)
	}
	for i := 1; i < len(res.latencies); i++ {
		if res.latencies[i] < res.latencies[i-1] {
			t.Fatal("latencies are not sorted")
		}
	}
	res = runRound(tg, request{path: "/", key: apiKey, wantLen: 99}, 2, 50*time.Millisecond)
	if res.requests != 0 || res.failures == 0 || !strings.Contains(res.firstFail, "bytes") {
		t.Errorf("wrong length: %d requests, %d failures (%s)", res.requests, res.failures, res.firstFail)
	}
	res = runRound(tg, request{path: "/", wantLen: int64(len(body))}, 2, 50*time.Millisecond)
	if res.requests != 0 || !strings.Contains(res.firstFail, "401") {
		t.Errorf("wrong status: %d requests (%s)", res.requests, res.firstFail)
	}
}

// TestCaddyfile: the two gateways' configs differ in their handler alone:
// reverse_proxy, or statusgate declaring the same backend.
func TestCaddyfile(t *testing.T) {
	plain := caddyfile(2001, 8001, "127.0.0.1:9000", "")
	sg := caddyfile(2001, 8001, "127.0.0.1:9000", apiKey)
	proxy := "\treverse_proxy 127.0.0.1:9000\n"
	block := "\tstatusgate 127.0.0.1:9000 {\n\t\tkey " + apiKey + "\n\t\tcoalesce off\n\t\tcache status off\n\t\tmax_per_client off\n\t}\n"
	if strings.Contains(plain, "statusgate") || !strings.Contains(plain, proxy) || !strings.Contains(sg, block) || strings.Contains(sg, "reverse_proxy") {
		t.Errorf("the handlers:\n%s\n%s", plain, sg)
	}
	if strings.Replace(sg, block, proxy, 1) != plain {
		t.Errorf("the configs differ in more than the handler:\n%s\n%s", plain, sg)
	}
	if len(apiKey) != 32 {
		t.Errorf("apiKey is %d characters", len(apiKey))
	}
}

func TestProcessCPU(t *testing.T) {
	// Busy-loop until this process's CPU time moves on by two ticks.
	before := processCPU(os.Getpid())
	after := before
	for end := time.Now().Add(5 * time.Second); after < before+2*clockTick && time.Now().Before(end); {
		after = processCPU(os.Getpid())
	}
	if before <= 0 || after < before+2*clockTick {
		t.Errorf("processCPU: %v, then %v after a busy loop", before, after)
	}
	if processCPU(0) != 0 {
		t.Error("processCPU(0) != 0")
	}
	r := roundResult{requests: 90, late: 10, cpu: time.Second}
	if got := r.cpuPerRequest(); got != 10*time.Millisecond {
		t.Errorf("cpuPerRequest = %v", got)
	}
}

func TestProcKB(t *testing.T) {
	f := t.TempDir() + "/status"
	os.WriteFile(f, []byte("Name:\tcaddy\nVmPeak:\t  200 kB\nVmHWM:\t   55512 kB\nVmRSS:\t 1 kB\n"), 0o600)
	if n, err := procKB(f, "VmHWM"); n != 55512 || err != nil {
		t.Errorf("VmHWM = %d, %v", n, err)
	}
	if _, err := procKB(f, "VmSwap"); err == nil {
		t.Error("a missing field gave no error")
	}
	if n, err := vmKB(os.Getpid(), "VmHWM"); n <= 0 || err != nil {
		t.Errorf("own VmHWM = %d, %v", n, err)
	}
}
