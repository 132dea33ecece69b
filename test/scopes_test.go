package test

import (
	"bytes"
	"maps"
	"net/http"
	"regexp"
	"slices"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
)

// scopedGateway is the example of docs/keys.md through a real Caddy: a Discord bot
// (keyA) that opens status and bans, a staff dashboard (keyB) that opens
// everything; extra lines go into the key block of the bot.
func scopedGateway(be *backend, botLines ...string) gateway {
	bot := "key bot " + keyA + " {\n\t\t\tendpoints status bans"
	for _, l := range botLines {
		bot += "\n\t\t\t" + l
	}
	return gateway{upstream: be.addr(), statusgate: []string{bot + "\n\t\t}", "key staff " + keyB}}
}

// anyUpdatedAt matches the time in an envelope's meta, which the gateway's
// own error envelopes set to now.
var anyUpdatedAt = regexp.MustCompile(`"updatedAt":\d+`)

// wantSameAsAnonymous asserts that got, the answer to a key outside its
// scope, is byte for byte the anonymous answer: status, headers (but Date)
// and body (but the time of a gateway's own envelope).
func wantSameAsAnonymous(t *testing.T, target string, got, anon response) {
	t.Helper()
	if got.Err != nil || anon.Err != nil {
		t.Errorf("%s: %v, %v", target, got.Err, anon.Err)
		return
	}
	norm := func(b []byte) []byte { return anyUpdatedAt.ReplaceAll(b, []byte(`"updatedAt":0`)) }
	hdr := func(h http.Header) http.Header { h = h.Clone(); h.Del("Date"); return h }
	if got.Status != anon.Status || !bytes.Equal(norm(got.Body), norm(anon.Body)) ||
		!maps.EqualFunc(hdr(got.Header), hdr(anon.Header), slices.Equal) {
		t.Errorf("%s: outside the key's scope\n%d %v\n%s\nanonymous\n%d %v\n%s",
			target, got.Status, got.Header, got.Body, anon.Status, anon.Header, anon.Body)
	}
}

// TestScopedKeyOutsideItsScope: a key outside its scope gets what a caller
// without a key gets, byte for byte, on protected endpoints (the disguised
// 404, or the 401 with hide_protected off) and public ones (the field
// layer); inside its scope it gets the backend's bytes, as does a key
// without a scope everywhere.
func TestScopedKeyOutsideItsScope(t *testing.T) {
	be := newBackend(t)
	for _, hide := range [][]string{nil, {"hide_protected off"}} {
		g := scopedGateway(be)
		g.statusgate = append(g.statusgate, hide...)
		g.start(t)
		for _, target := range []string{
			"/api/v1/server",
			"/api/v1/worlds/world",
			"/api/v1/player/" + alex + "?detailed=true",
			"/api/v1/nothing",
		} {
			anon := send(t, "GET", target)
			bot := send(t, "GET", target, withKey(keyA))
			wantSameAsAnonymous(t, target, bot, anon)
		}
		// The anonymous player above was filtered: the comparison meant something.
		target := "/api/v1/player/" + alex
		wantFiltered(t, send(t, "GET", target, withKey(keyA)), target, "op", "banned", "discord")
		wantBackendBytes(t, send(t, "GET", target, withKey(keyB)), target)
		wantBackendBytes(t, send(t, "GET", "/api/v1/bans", withKey(keyA)), "/api/v1/bans")
		wantBackendBytes(t, send(t, "GET", "/api/v1/server", withKey(keyB)), "/api/v1/server")
		be.take()
	}
}

// TestScopedKeyCap: past its max_in_flight the bot's caller gets 429 with
// Retry-After at once, while the staff key and an anonymous caller are
// served meanwhile.
func TestScopedKeyCap(t *testing.T) {
	be := newBackend(t)
	scopedGateway(be, "max_in_flight 1").start(t)
	be.holdAnswers() // every answer waits for release
	defer be.release()
	done := make(chan response, 3)
	first := make(chan response, 1)
	go func() { first <- send(t, "GET", "/api/v1/bans", withKey(keyA)) }()
	fixture.WaitFor(t, "the first request at the backend", func() bool { return be.atBackend() == 1 })
	go func() { done <- send(t, "GET", "/api/v1/bans", withKey(keyB)) }()
	go func() { done <- send(t, "GET", "/api/v1/status") }()
	fixture.WaitFor(t, "the staff key's and the anonymous caller's requests at the backend", func() bool { return be.atBackend() == 3 })

	r := send(t, "GET", "/api/v1/status", withKey(keyA))
	select {
	case f := <-first:
		t.Errorf("the refusal came after the first request's answer: it waited")
		first <- f
	default:
	}
	wantError(t, r, http.StatusTooManyRequests, "/api/v1/status")
	if got := r.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	be.release()
	done <- <-first
	for range 3 {
		if r := <-done; r.Status != http.StatusOK {
			t.Errorf("a caller within its limits got %d: %s", r.Status, r.Body)
		}
	}
	// The place is given back.
	wantBackendBytes(t, send(t, "GET", "/api/v1/bans", withKey(keyA)), "/api/v1/bans")
}

// TestScopedKeyIndexAndCustom: the index shows a scoped key what an
// anonymous caller sees plus its scope, in the usual order; a custom station
// in the scope answers whole, and is the disguised 404 for a key whose scope
// lacks it.
func TestScopedKeyIndexAndCustom(t *testing.T) {
	be := newBackend(t)
	gateway{upstream: be.addr(), statusgate: []string{
		"key bot " + keyA + " {\n\t\t\tendpoints status bans custom/votes\n\t\t}",
		"key web " + keyB + " {\n\t\t\tendpoints status performance\n\t\t}",
		"enable custom/votes",
	}}.start(t)
	bans, perf := stProtected[7], stProtected[1]
	votes := station{"custom/votes", "/api/v1/custom/votes", true}
	wantIndex(t, send(t, "GET", "/api/v1", withKey(keyA)), true, true, stStatus, stPlayer, bans, votes)
	wantIndex(t, send(t, "GET", "/api/v1", withKey(keyB)), true, true, stStatus, stPlayer, perf)
	wantIndex(t, send(t, "GET", "/api/v1"), true, false, stStatus, stPlayer)

	target := "/api/v1/custom/votes"
	wantBackendBytes(t, send(t, "GET", target, withKey(keyA)), target)
	wantSameAsAnonymous(t, target, send(t, "GET", target, withKey(keyB)), send(t, "GET", target))
	wantNotFound(t, send(t, "GET", target, withKey(keyB)), target)
	be.wantSeen(t, "custom station", target)
}

// TestScopeNarrowedByReload: a request of the bot's under way when a reload
// takes bans out of its scope finishes under the config it started with;
// the bot's next request for bans is the disguised 404 and never reaches the
// backend.
func TestScopeNarrowedByReload(t *testing.T) {
	be := newBackend(t)
	g := scopedGateway(be)
	g.start(t)
	be.misbehave(sendSlow)
	inFlight := make(chan response, 1)
	go func() { inFlight <- send(t, "GET", "/api/v1/bans", withKey(keyA)) }()
	waitSeen(t, be, 1)
	g.statusgate[0] = "key bot " + keyA + " {\n\t\t\tendpoints status\n\t\t}"
	g.start(t)
	be.misbehave(behave)
	wantBackendBytes(t, <-inFlight, "/api/v1/bans")
	wantNotFound(t, send(t, "GET", "/api/v1/bans", withKey(keyA)), "/api/v1/bans")
	wantBackendBytes(t, send(t, "GET", "/api/v1/bans", withKey(keyB)), "/api/v1/bans")
	be.wantSeen(t, "after the reload", "/api/v1/bans")
}

// TestScopesShareByClass: with coalescing and the cache on, two keys with
// different scopes asking for the same public answer at once share by what
// they may read: the key whose scope opens player gets the whole answer, the
// one whose scope does not gets the filtered one, like an anonymous caller;
// one backend trip per class, and the cache keeps them apart afterwards.
func TestScopesShareByClass(t *testing.T) {
	be := newBackend(t)
	gateway{upstream: be.addr(), shared: true, statusgate: []string{
		"key bot " + keyA + " {\n\t\t\tendpoints status bans\n\t\t}",
		"key web " + keyB + " {\n\t\t\tendpoints status player\n\t\t}",
		"max_per_client off",
	}}.start(t)
	target := "/api/v1/player/" + alex
	sharedByClass(t, be, target, 4, []string{withKey(keyA)}, []string{withKey(keyB)})
	// status is cached per class: the bot (in scope) and web share the
	// whole answer, an anonymous caller gets its own, filtered.
	status := "/api/v1/status"
	wantBackendBytes(t, send(t, "GET", status, withKey(keyA)), status)
	wantBackendBytes(t, send(t, "GET", status, withKey(keyB)), status)
	wantFiltered(t, send(t, "GET", status), status)
	if seen := be.take(); len(seen) != 2 {
		t.Errorf("status for two keys in scope and one anonymous caller made %d trips, want 2", len(seen))
	}
}
