package gateway

import (
	"strings"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestWrittenOnce loads, through a real Caddy, the configs of issue 51
// written slightly wrong in the global statusgate option, and checks that
// each is refused with its fix or reads as written (the golden files of
// caddymodule hold each message whole):
//   - a declared server's proxy block reads like a handler's: the backend
//     gets the caller's address for {remote_host}, not the text;
//   - a handler that names a declared server's upstreams itself is refused
//     with "write server lobby";
//   - a handler's key of a global key's name is one key with both secrets
//     and the key's scope, or refused where the blocks differ;
//   - the global option's extra_fields count for a handler's
//     protected_fields in the Caddyfile.
func TestWrittenOnce(t *testing.T) {
	be := NewBackend(t)
	global := func(lines ...string) []string {
		return []string{"log {\n\t\tlevel ERROR\n\t}", "statusgate {\n\t\t" + strings.Join(lines, "\n\t\t") + "\n\t}"}
	}
	const server = "/api/v1/server"

	t.Run("a server's proxy block reads like a handler's", func(t *testing.T) {
		Gateway{
			Global: global("server lobby " + be.Addr() + " {\n\t\t\tproxy {\n\t\t\t\theader_up X-Caller-Host {remote_host}\n\t\t\t}\n\t\t}"),
			Routes: "statusgate {\n\t\tserver lobby\n\t\tcache status off\n\t}",
		}.Start(t)
		Send(t, "GET", "/api/v1/status")
		seen := be.WantSeen(t, "status through server lobby", "/api/v1/status")
		if len(seen) == 1 && seen[0].Header.Get("X-Caller-Host") != "127.0.0.1" {
			t.Errorf("the backend got X-Caller-Host %q, want the caller's address 127.0.0.1", seen[0].Header.Get("X-Caller-Host"))
		}
	})

	t.Run("a handler naming a declared server's address", func(t *testing.T) {
		msg := LoadRefused(t, Gateway{Global: global("server lobby " + be.Addr() + " {\n\t\t\tmax_in_flight 2\n\t\t\tqueue off\n\t\t}"),
			Upstream: be.Addr(), Statusgate: []string{"key " + KeyA}}.Caddyfile())
		if !strings.Contains(msg, "reach server lobby, which the global statusgate option declares with its limits: write server lobby in the block in place of the upstreams") {
			t.Errorf("refused with %q, want the fix", msg)
		}
	})

	t.Run("one key name, one key", func(t *testing.T) {
		scoped := func(secret string) string { return "key bot " + secret + " {\n\t\t\tendpoints server\n\t\t}" }
		msg := LoadRefused(t, Gateway{Global: global(scoped(KeyA)), Upstream: be.Addr(), Statusgate: []string{"key bot " + KeyB}}.Caddyfile())
		if !strings.Contains(msg, "endpoints not the same as on the global statusgate option's key 'bot'") || strings.Contains(msg, KeyA) || strings.Contains(msg, KeyB) {
			t.Errorf("refused with %q, want the key's blocks named and no secret", msg)
		}
		Gateway{Global: global(scoped(KeyA)), Upstream: be.Addr(), Statusgate: []string{scoped(KeyB), "require_key bans on"}}.Start(t)
		for _, key := range []string{KeyA, KeyB} {
			WantBackendBytes(t, Send(t, "GET", server, WithKey(key)), server)
			WantNotFound(t, Send(t, "GET", "/api/v1/bans", WithKey(key)), "/api/v1/bans")
		}
		be.WantSeen(t, "both secrets of bot, scoped", server, server)
	})

	t.Run("the global option's extra_fields", func(t *testing.T) {
		Gateway{Global: global("extra_fields player pronouns"), Upstream: be.Addr(), Statusgate: []string{"key " + KeyA, "protected_fields player pronouns"}}.Start(t)
	})
}
