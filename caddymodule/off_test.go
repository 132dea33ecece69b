package caddymodule

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/statusgate/statusgate/caddymodule/internal/guard"
)

// TestBackendOffForms follows each backend option's off from the Caddyfile
// through the JSON it adapts to and back into a provisioned handler: the
// resolved limits and the guard it builds.
func TestBackendOffForms(t *testing.T) {
	tests := []struct {
		line, json string
		check      func(t *testing.T, l guard.Limits, h *Handler)
	}{
		{"max_in_flight off", `{"max_in_flight":-1}`, func(t *testing.T, l guard.Limits, h *Handler) {
			if l.InFlight != 0 || h.guard.Limits().InFlight != 0 {
				t.Errorf("in flight %d, guard's %d; want 0 and none", l.InFlight, h.guard.Limits().InFlight)
			}
		}},
		{"max_main_thread off", `{"max_main_thread":-1}`, func(t *testing.T, l guard.Limits, h *Handler) {
			if l.MainThread != 0 || h.guard.Limits().MainThread != 0 {
				t.Errorf("main thread %d, guard's %d; want 0 and none", l.MainThread, h.guard.Limits().MainThread)
			}
		}},
		{"max_per_client off", `{"max_per_client":-1}`, func(t *testing.T, l guard.Limits, h *Handler) {
			if l.PerClient != 0 || h.guard.Limits().PerClient != 0 {
				t.Errorf("per client %d; want 0, no bound", l.PerClient)
			}
		}},
		{"max_topics off", `{"max_topics":-1}`, func(t *testing.T, l guard.Limits, h *Handler) {
			if n := h.guard.Limits().Topics; n != 0 || l.Topics != 0 {
				t.Errorf("topics bounded at %d; want no bound", n)
			}
		}},
		{"queue off", `{"queue_length":-1}`, func(t *testing.T, l guard.Limits, h *Handler) {
			if g := h.guard.Limits(); l.Queue != 0 || l.Wait != 0 || g.Queue != 0 || g.InFlight == 0 || g.MainThread == 0 {
				t.Errorf("queue %d, wait %v, guard's limits %+v; want no queue, no wait, both limiters", l.Queue, l.Wait, g)
			}
		}},
		{"timeout off", `{"timeout":-1}`, func(t *testing.T, l guard.Limits, h *Handler) {
			if l.Timeout != 0 || h.guard.Limits().Timeout != 0 {
				t.Errorf("timeout %v, guard's %v; want none", l.Timeout, h.guard.Limits().Timeout)
			}
		}},
		{"write_timeout off", `{"write_timeout":-1}`, func(t *testing.T, _ guard.Limits, h *Handler) {
			if h.Backend.writeTimeout() != 0 || h.live.limits.writeTimeout != 0 {
				t.Errorf("write timeout %v, streams' %v; want none", h.Backend.writeTimeout(), h.live.limits.writeTimeout)
			}
		}},
		{"coalesce off", `{"coalesce":false}`, func(t *testing.T, l guard.Limits, h *Handler) {
			if l.Coalesce || h.guard.Limits().Coalesce {
				t.Errorf("coalesce %v; want off", l.Coalesce)
			}
		}},
		{"cache status off", `{"cache":{"status":-1}}`, func(t *testing.T, _ guard.Limits, h *Handler) {
			if ttl := h.table.lookup("status").CacheTTL; ttl != 0 {
				t.Errorf("status cached for %v, want not cached", ttl)
			}
			if ttl := h.table.lookup("entities").CacheTTL; ttl != 5*time.Second {
				t.Errorf("entities cached for %v, want its default 5s", ttl)
			}
		}},
		{"snapshot status off", `{"snapshot":{"status":-1}}`, func(t *testing.T, _ guard.Limits, h *Handler) {
			if ep := h.table.lookup("status"); ep.Snapshot != 0 || ep.CacheTTL != time.Second {
				t.Errorf("status: snapshot %v, ttl %v; want no snapshot, the default 1s", ep.Snapshot, ep.CacheTTL)
			}
		}},
		{"cache_size off", `{"cache_size":-1}`, func(t *testing.T, l guard.Limits, h *Handler) {
			if l.CacheSize != 0 || h.guard.Limits().CacheSize != 0 {
				t.Errorf("cache size %d; want no micro-cache", l.CacheSize)
			}
			for _, ep := range h.table.ordered {
				if ep.CacheTTL != 0 {
					t.Errorf("%s cached for %v with the micro-cache off", ep.Name, ep.CacheTTL)
				}
			}
		}},
		// Off entries may stand beside cache_size off: they say the same.
		{"cache_size off\n\tcache status off\n\tsnapshot status 5s", `{"cache":{"status":-1},"snapshot":{"status":5000000000},"cache_size":-1}`,
			func(t *testing.T, _ guard.Limits, h *Handler) {
				if ep := h.table.lookup("status"); ep.CacheTTL != 0 {
					t.Errorf("status cached for %v with the micro-cache off", ep.CacheTTL)
				}
			}},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			parsed, err := parseTestCaddyfile("statusgate {\n\t" + tc.line + "\n}")
			if err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(parsed)
			if want := `{"backend":` + tc.json + `}`; string(got) != want {
				t.Fatalf("JSON %s, want %s", got, want)
			}
			h := mustProvision(t, string(got))
			l, err := resolveLimits(h.Backend)
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, l, h)
		})
	}
}

// TestBackendZeroRefused checks that an option written as 0 in JSON (a
// duration as "0s", the guard as "") is refused with its path, as the
// Caddyfile refuses it, instead of read as the default: the error says to
// leave it out for that, and what else to write.
func TestBackendZeroRefused(t *testing.T) {
	for member, want := range map[string]string{
		`"max_in_flight":0`:          "backend.max_in_flight: 0 is not a limit: write a whole number of at least 1, leave max_in_flight out for its default, or write -1 for off",
		`"max_main_thread":0`:        "backend.max_main_thread: 0 is not a limit",
		`"max_per_client":0`:         "backend.max_per_client: 0 is not a limit",
		`"queue_length":0`:           "backend.queue_length: 0 is not a limit",
		`"queue_wait":"0s"`:          `backend.queue_wait: "0s" is not a duration: write a positive one ("2s"), leave queue_wait out for its default`,
		`"timeout":0`:                "backend.timeout: 0 is not a duration",
		`"cache_size":0`:             "backend.cache_size: 0 is not a size: write bytes, at least 1, leave cache_size out for its default, or write -1 for off",
		`"max_response":0`:           "backend.max_response: 0 is not a size",
		`"max_held":0`:               "backend.max_held: 0 is not a size",
		`"write_timeout":0`:          "backend.write_timeout: 0 is not a duration",
		`"client_prefix_v6":0`:       "backend.client_prefix_v6: 0 is not a prefix length: write one from 1 to 128, leave client_prefix_v6 out for its default",
		`"guard":""`:                 `backend.guard: "" is not a guard name: write one of letters, digits, '_' and '-', leave guard out for its default`,
		`"instances":0`:              "backend.instances: 0 is not a count of gateways: write a whole number of at least 1, leave instances out for its default",
		`"max_streams":0`:            "backend.max_streams: 0 is not a limit",
		`"max_streams_per_client":0`: "backend.max_streams_per_client: 0 is not a limit",
		`"stream_lifetime":"0s"`:     "backend.stream_lifetime: \"0s\" is not a duration",
		`"stream_heartbeat":0`:       "backend.stream_heartbeat: 0 is not a duration",
	} {
		err := json.Unmarshal([]byte(`{"backend":{`+member+`}}`), new(Handler))
		wantErrorWords(t, err, want)
		for _, cannot := range []string{"max_response", "max_held", "client_prefix_v6", "guard", "instances", "queue_wait", "stream_heartbeat"} {
			if err != nil && strings.Contains(member, `"`+cannot+`"`) && strings.Contains(err.Error(), "-1 for off") {
				t.Errorf("%s: offers off, which %s cannot be: %v", member, cannot, err)
			}
		}
	}
	// Left out, every option is its default: the zero BackendConfig.
	h := mustProvision(t, `{"backend":{}}`)
	a, errA := resolveLimits(h.Backend)
	b, errB := resolveLimits(BackendConfig{})
	if errA != nil || errB != nil || a != b {
		t.Errorf("{} gives %+v (%v), nothing gives %+v (%v)", a, errA, b, errB)
	}
}

// TestBackendOffCaddyfileErrors checks every mistake around off in the
// Caddyfile: the message names the option and the word, says what to write
// instead, and carries the line.
func TestBackendOffCaddyfileErrors(t *testing.T) {
	tests := []struct {
		lines string // from line 2
		words []string
		line  int
	}{
		{"queue off 2s", []string{"queue: '2s' after off: with the queue off nobody waits"}, 2},
		{"queue 8 off", []string{"queue: the wait cannot be off: nobody waits without a bound; write queue off"}, 2},
		{"queue 0", []string{"queue: '0' is not a whole number of at least 1 or off"}, 2},
		{"max_response off", []string{"max_response cannot be off: it bounds the memory one answer takes"}, 2},
		{"max_held off", []string{"max_held cannot be off: it bounds the memory slow clients"}, 2},
		{"client_prefix_v6 off", []string{"client_prefix_v6 cannot be off", "128 counts each IPv6 address"}, 2},
		{"guard off", []string{"guard cannot be off", "leave guard out"}, 2},
		{"cache_size none", []string{"cache_size: 'none' is not a size such as 16MiB, or off"}, 2},
		{"max_held none", []string{"max_held: 'none' is not a size such as 16MiB"}, 2},
		{"cache status 0", []string{"cache: '0' is not a positive duration such as 500ms or 2s, or off"}, 2},
		{"snapshot status 0s", []string{"snapshot: '0s' is not a positive duration such as 500ms or 2s, or off"}, 2},
		{"timeout 0", []string{"timeout: '0' is not a positive duration", "or off"}, 2},
		{"cache_size off\n\tcache status off\n\tcache worlds 2s",
			[]string{"cache: worlds 2s, but cache_size is off: there is no micro-cache; write cache worlds off or leave the line out"}, 4},
		{"cache entities 2s\n\tcache_size off", []string{"cache_size: off, but cache entities has a time to live"}, 3},
		{"cache_size off\n\tcache_size off", []string{"'cache_size' given twice"}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.lines, func(t *testing.T) {
			_, err := parseTestCaddyfile("statusgate {\n\t" + tc.lines + "\n}")
			wantErrorWords(t, err, tc.words...)
			if at := fmt.Sprintf(", at Testfile:%d", tc.line); !strings.HasSuffix(err.Error(), at) {
				t.Errorf("error %q does not end with %q", err, at)
			}
		})
	}
}

// TestBackendOffJSONErrors checks the same mistakes in the JSON: the message
// names the option by its JSON path and says what to write instead.
func TestBackendOffJSONErrors(t *testing.T) {
	tests := []struct {
		backend string
		words   []string
	}{
		{`{"cache":{"status":0}}`, []string{"backend.cache.status: 0 is not a duration: write a positive one, or -1 for off (off in the Caddyfile); leave status out for its default"}},
		{`{"cache":{"custom/votes":"0s"}}`, []string{"backend.cache.custom/votes: 0 is not a duration", "-1 for off"}},
		{`{"snapshot":{"worlds":0}}`, []string{"backend.snapshot.worlds: 0 is not a duration", "-1 for off"}},
		{`{"cache":{"status":-2}}`, []string{"backend.cache.status: -2ns is negative: write a positive duration, or -1 for off"}},
		{`{"snapshot":{"status":"-5s"}}`, []string{"backend.snapshot.status: -5s is negative"}},
		{`{"cache":{"stats":"1s"}}`, []string{"backend.cache: unknown endpoint 'stats'"}},
		{`{"cache_size":-1,"cache":{"entities":"2s","status":-1}}`, []string{"backend.cache.entities: 2s, but cache_size is -1 (no micro-cache): write -1 or leave entities out"}},
		{`{"cache_size":-2}`, []string{"backend.cache_size: -2 is not a size", "or -1 for off"}},
		{`{"queue_length":-2}`, []string{"backend.queue_length: -2 is not a limit", "or -1 for off (leave it out for the default)"}},
		{`{"max_in_flight":-3}`, []string{"backend.max_in_flight: -3 is not a limit"}},
		{`{"max_topics":-2}`, []string{"backend.max_topics: -2 is not a limit", "or -1 for off (leave it out for the default)"}},
		{`{"queue_wait":-1}`, []string{"backend.queue_wait cannot be off (-1): nobody waits without a bound; to refuse at once when the backend is busy, set queue_length to -1"}},
		{`{"queue_wait":"-2s"}`, []string{"backend.queue_wait: -2s is negative"}},
		{`{"queue_length":-1,"queue_wait":"1s"}`, []string{"backend.queue_wait: 1s, but queue_length is -1 (off): there is no queue to wait in"}},
		{`{"timeout":-2}`, []string{"backend.timeout: -2ns is negative", "or -1 for off"}},
		{`{"write_timeout":"-3s"}`, []string{"backend.write_timeout: -3s is negative"}},
		{`{"max_response":-1}`, []string{"backend.max_response cannot be off (-1): it bounds the memory one answer takes"}},
		{`{"max_held":-1}`, []string{"backend.max_held cannot be off (-1): it bounds the memory slow clients can make the gateway hold"}},
		{`{"max_held":-5}`, []string{"backend.max_held: -5 is not a size"}},
		{`{"client_prefix_v6":-1}`, []string{"backend.client_prefix_v6 cannot be off (-1)", "128 counts each IPv6 address"}},
		{`{"client_prefix_v6":129}`, []string{"backend.client_prefix_v6: 129 is not a prefix length from 1 to 128"}},
		{`{"guard":"off"}`, []string{"backend.guard cannot be off ('off' is not a guard name)"}},
	}
	for _, tc := range tests {
		t.Run(tc.backend, func(t *testing.T) {
			wantProvisionError(t, `{"backend":`+tc.backend+`}`, tc.words...)
		})
	}
}

// TestQueueOff checks that with the queue off a caller that finds every
// slot busy gets 503 Backend busy at once, and that the main-thread stations
// have no queue either, while other stations still get through.
func TestQueueOff(t *testing.T) {
	h, _ := newTestHandler(t, "max_in_flight 1\nqueue off\nmax_per_client off")
	g := newGate()
	done := make(chan reply, 1)
	go func() { done <- serve(t, h, g, "GET", "/api/v1/status", nil) }()
	<-g.entered
	// waited is how many callers have waited in a queue of the guard: a
	// refusal at once leaves it as it was.
	waited := func() uint64 { u := units(h); return u.All.Stats().Waited + u.Main.Stats().Waited }
	r := serve(t, h, g, "GET", "/api/v1/player/40094f2f-ca8f-4826-8b31-11e0f4c449df", nil) // another trip, not the first one's
	if r.Code != 503 || r.envelope.Error.Message != "Backend busy" || r.Header().Get("Retry-After") != "1" {
		t.Errorf("second caller: %d %q Retry-After %q, want 503 Backend busy, 1", r.Code, r.envelope.Error.Message, r.Header().Get("Retry-After"))
	}
	if n := waited(); n != 0 {
		t.Errorf("%d callers waited in a queue: the refusal was not at once", n)
	}
	g.release <- struct{}{}
	if r := <-done; r.Code != 200 {
		t.Errorf("first caller: %d", r.Code)
	}

	h, _ = newTestHandler(t, "key "+testKey+"\nqueue off")
	go func() { done <- serve(t, h, g, "GET", "/api/v1/placeholders?p=x", keyHeader(testKey)) }()
	<-g.entered
	if r := serve(t, h, g, "GET", "/api/v1/placeholders?p=y", keyHeader(testKey)); r.Code != 503 || waited() != 0 {
		t.Errorf("a second placeholders call: %d after %d callers waited in a queue, want 503 at once", r.Code, waited())
	}
	other := make(chan reply, 1)
	go func() { other <- serve(t, h, g, "GET", "/api/v1/status", nil) }()
	<-g.entered // another station is admitted beside it
	g.release <- struct{}{}
	g.release <- struct{}{}
	if a, b := <-done, <-other; a.Code != 200 || b.Code != 200 {
		t.Errorf("placeholders %d, status %d; want both 200", a.Code, b.Code)
	}
}
