package gateway

import (
	"net/http"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestScopedKeyOutsideItsScope: a key outside its scope gets what a caller
// without a key gets, byte for byte, on protected endpoints (the disguised
// 404, or the 401 with hide_protected off) and public ones (the field
// layer); inside its scope it gets the backend's bytes, as does a key
// without a scope everywhere.
func TestScopedKeyOutsideItsScope(t *testing.T) {
	be := NewBackend(t)
	for _, hide := range [][]string{nil, {"hide_protected off"}} {
		g := ScopedGateway(be)
		g.Statusgate = append(g.Statusgate, hide...)
		g.Start(t)
		for _, target := range []string{
			"/api/v1/server",
			"/api/v1/worlds/world",
			"/api/v1/player/" + Alex + "?detailed=true",
			"/api/v1/nothing",
		} {
			anon := Send(t, "GET", target)
			bot := Send(t, "GET", target, WithKey(KeyA))
			WantSameAsAnonymous(t, target, bot, anon)
		}
		// The anonymous player above was filtered: the comparison meant something.
		target := "/api/v1/player/" + Alex
		WantFiltered(t, Send(t, "GET", target, WithKey(KeyA)), target, "op", "banned", "discord")
		WantBackendBytes(t, Send(t, "GET", target, WithKey(KeyB)), target)
		WantBackendBytes(t, Send(t, "GET", "/api/v1/bans", WithKey(KeyA)), "/api/v1/bans")
		WantBackendBytes(t, Send(t, "GET", "/api/v1/server", WithKey(KeyB)), "/api/v1/server")
		be.Take()
	}
}

// TestScopedKeyCap: past its max_in_flight the bot's caller gets 429 with
// Retry-After at once, while the staff key and an anonymous caller are
// served meanwhile.
func TestScopedKeyCap(t *testing.T) {
	be := NewBackend(t)
	ScopedGateway(be, "max_in_flight 1").Start(t)
	be.HoldAnswers() // every answer waits for release
	defer be.Release()
	done := make(chan Response, 3)
	first := make(chan Response, 1)
	go func() { first <- Send(t, "GET", "/api/v1/bans", WithKey(KeyA)) }()
	fixture.WaitFor(t, "the first request at the backend", func() bool { return be.AtBackend() == 1 })
	go func() { done <- Send(t, "GET", "/api/v1/bans", WithKey(KeyB)) }()
	go func() { done <- Send(t, "GET", "/api/v1/status") }()
	fixture.WaitFor(t, "the staff key's and the anonymous caller's requests at the backend", func() bool { return be.AtBackend() == 3 })

	r := Send(t, "GET", "/api/v1/status", WithKey(KeyA))
	select {
	case f := <-first:
		t.Errorf("the refusal came after the first request's answer: it waited")
		first <- f
	default:
	}
	WantError(t, r, http.StatusTooManyRequests, "/api/v1/status")
	if got := r.Header.Get("Retry-After"); got != "1" {
		t.Errorf("Retry-After %q, want 1", got)
	}
	be.Release()
	done <- <-first
	for range 3 {
		if r := <-done; r.Status != http.StatusOK {
			t.Errorf("a caller within its limits got %d: %s", r.Status, r.Body)
		}
	}
	// The place is given back.
	WantBackendBytes(t, Send(t, "GET", "/api/v1/bans", WithKey(KeyA)), "/api/v1/bans")
}

// TestScopedKeyIndexAndCustom: the index shows a scoped key what an
// anonymous caller sees plus its scope, in the usual order; a custom station
// in the scope answers whole, and is the disguised 404 for a key whose scope
// lacks it.
func TestScopedKeyIndexAndCustom(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Statusgate: []string{
		"key bot " + KeyA + " {\n\t\t\tendpoints status bans custom/votes\n\t\t}",
		"key web " + KeyB + " {\n\t\t\tendpoints status performance\n\t\t}",
		"enable custom/votes",
	}}.Start(t)
	bans, perf := stProtected[7], stProtected[1]
	votes := station{"custom/votes", "/api/v1/custom/votes", true}
	wantIndex(t, Send(t, "GET", "/api/v1", WithKey(KeyA)), true, true, stStatus, stPlayer, bans, votes)
	wantIndex(t, Send(t, "GET", "/api/v1", WithKey(KeyB)), true, true, stStatus, stPlayer, perf)
	wantIndex(t, Send(t, "GET", "/api/v1"), true, false, stStatus, stPlayer)

	target := "/api/v1/custom/votes"
	WantBackendBytes(t, Send(t, "GET", target, WithKey(KeyA)), target)
	WantSameAsAnonymous(t, target, Send(t, "GET", target, WithKey(KeyB)), Send(t, "GET", target))
	WantNotFound(t, Send(t, "GET", target, WithKey(KeyB)), target)
	be.WantSeen(t, "custom station", target)
}

// TestScopeNarrowedByReload: a request of the bot's under way when a reload
// takes bans out of its scope finishes under the config it started with;
// the bot's next request for bans is the disguised 404 and never reaches the
// backend.
func TestScopeNarrowedByReload(t *testing.T) {
	be := NewBackend(t)
	g := ScopedGateway(be)
	g.Start(t)
	be.Misbehave(SendSlow)
	inFlight := make(chan Response, 1)
	go func() { inFlight <- Send(t, "GET", "/api/v1/bans", WithKey(KeyA)) }()
	WaitSeen(t, be, 1)
	g.Statusgate[0] = "key bot " + KeyA + " {\n\t\t\tendpoints status\n\t\t}"
	g.Start(t)
	be.Misbehave(Behave)
	WantBackendBytes(t, <-inFlight, "/api/v1/bans")
	WantNotFound(t, Send(t, "GET", "/api/v1/bans", WithKey(KeyA)), "/api/v1/bans")
	WantBackendBytes(t, Send(t, "GET", "/api/v1/bans", WithKey(KeyB)), "/api/v1/bans")
	be.WantSeen(t, "after the reload", "/api/v1/bans")
}

// TestScopesShareByClass: with coalescing and the cache on, two keys with
// different scopes asking for the same public answer at once share by what
// they may read: the key whose scope opens player gets the whole answer, the
// one whose scope does not gets the filtered one, like an anonymous caller;
// one backend trip per class, and the cache keeps them apart afterwards.
func TestScopesShareByClass(t *testing.T) {
	be := NewBackend(t)
	Gateway{Upstream: be.Addr(), Shared: true, Statusgate: []string{
		"key bot " + KeyA + " {\n\t\t\tendpoints status bans\n\t\t}",
		"key web " + KeyB + " {\n\t\t\tendpoints status player\n\t\t}",
		"max_per_client off",
	}}.Start(t)
	target := "/api/v1/player/" + Alex
	SharedByClass(t, be, target, 4, []string{WithKey(KeyA)}, []string{WithKey(KeyB)})
	// status is cached per class: the bot (in scope) and web share the
	// whole answer, an anonymous caller gets its own, filtered.
	status := "/api/v1/status"
	WantBackendBytes(t, Send(t, "GET", status, WithKey(KeyA)), status)
	WantBackendBytes(t, Send(t, "GET", status, WithKey(KeyB)), status)
	WantFiltered(t, Send(t, "GET", status), status)
	if seen := be.Take(); len(seen) != 2 {
		t.Errorf("status for two keys in scope and one anonymous caller made %d trips, want 2", len(seen))
	}
}
