package gateway

import (
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestOptions loads one config per option of the statusgate block and checks
// what each changes, for the client and at the backend.
func TestOptions(t *testing.T) {
	be := NewBackend(t)
	server, player := "/api/v1/server", "/api/v1/player/"+Alex+"?detailed=true"
	const votes = "/api/v1/custom/votes"

	t.Run("auth off", func(t *testing.T) {
		StartDefault(t, be, "auth off", "require_key status on", "protected_fields status online", "enable custom/votes")
		// Everything public, nothing filtered, the backend's meta.authenticated true.
		for _, target := range []string{server, player, "/api/v1/status", "/api/v1/bans"} {
			WantBackendBytes(t, Send(t, "GET", target), target)
			be.WantSeen(t, target, target)
		}
		// The key is still stripped from the upstream request, header and
		// query (a custom station's, which keeps the rest of it).
		WantBackendBytes(t, Send(t, "GET", votes+"?key="+KeyA+"&x=1", WithKey(KeyA)), votes+"?x=1")
		be.WantSeen(t, "keyed, auth off", votes+"?x=1")
		// Disabled stays disabled.
		WantNotFound(t, Send(t, "GET", "/api/v1/whitelist"), "/api/v1/whitelist")
		be.WantSeen(t, "whitelist, auth off")
	})

	t.Run("allow_query_key on", func(t *testing.T) {
		StartDefault(t, be, "allow_query_key", "enable custom/votes")
		for _, c := range []struct{ target, upstream string }{
			{server + "?key=" + KeyA, server},
			{server + "?a=1&key=" + KeyA + "&b=2", server},
			{votes + "?a=1&key=" + KeyA + "&b=2", votes + "?a=1&b=2"},
			{votes + "?k%65y=" + KeyA + "&b=%20", votes + "?b=%20"},
		} {
			WantBackendBytes(t, Send(t, "GET", c.target), c.upstream)
			be.WantSeen(t, c.target, c.upstream)
		}
		// The header wins when both are present, either way round.
		WantNotFound(t, Send(t, "GET", server+"?key="+KeyA, WithKey(BadKey)), server)
		be.WantSeen(t, "bad header, good query")
		WantBackendBytes(t, Send(t, "GET", server+"?key="+BadKey, WithKey(KeyA)), server)
		be.WantSeen(t, "good header, bad query", server)
		// An empty header still decides.
		WantNotFound(t, Send(t, "GET", server+"?key="+KeyA, "X-API-Key:"), server)
		WantNotFound(t, Send(t, "GET", server+"?key="+BadKey), server)
		be.WantSeen(t, "refused query keys")
		// A public endpoint with a query key: unfiltered, key stripped.
		WantBackendBytes(t, Send(t, "GET", player+"&key="+KeyA), player)
		be.WantSeen(t, "public with query key", player)
	})

	t.Run("allow_query_key off", func(t *testing.T) {
		StartDefault(t, be, "allow_query_key off")
		WantNotFound(t, Send(t, "GET", server+"?key="+KeyA), server)
		WantNotFound(t, Send(t, "GET", server+"?k%65y="+KeyA), server)
		be.WantSeen(t, "query key, off")
		// Does not authenticate on a public endpoint either, and is stripped.
		target := "/api/v1/player/" + Alex + "?key=" + KeyA + "&detailed=true&k%65y=" + KeyA + "&KEY=x"
		WantFiltered(t, Send(t, "GET", target), player, PlayerFields...)
		be.WantSeen(t, "public, query key, off", player)
	})

	t.Run("hide_protected off", func(t *testing.T) {
		StartDefault(t, be, "hide_protected off")
		WantError(t, Send(t, "GET", server), http.StatusUnauthorized, server)
		WantError(t, Send(t, "GET", "/api/bans", WithKey(BadKey)), http.StatusUnauthorized, "/api/bans")
		WantNotFound(t, Send(t, "GET", "/api/v1/nothing"), "/api/v1/nothing")
		WantNotFound(t, Send(t, "GET", "/api/v1/whitelist"), "/api/v1/whitelist")
		WantError(t, Send(t, "POST", server), http.StatusUnauthorized, server) // the key before the method
		be.WantSeen(t, "hide_protected off")
		WantBackendBytes(t, Send(t, "GET", server, WithKey(KeyA)), server)
		be.WantSeen(t, "keyed, hide off", server)
	})

	t.Run("require_key", func(t *testing.T) {
		StartDefault(t, be, "require_key server off", "require_key status on")
		// server public: its default protected fields go, in config order.
		WantFiltered(t, Send(t, "GET", server), server, "motd", "ip", "port")
		be.WantSeen(t, "public server", server)
		WantBackendBytes(t, Send(t, "GET", server, WithKey(KeyA)), server)
		be.WantSeen(t, "keyed server", server)
		WantNotFound(t, Send(t, "GET", "/api/v1/status"), "/api/v1/status")
		be.WantSeen(t, "protected status")
		WantBackendBytes(t, Send(t, "GET", "/api/v1/status", WithKey(KeyA)), "/api/v1/status")
		be.WantSeen(t, "keyed status", "/api/v1/status")
	})

	t.Run("protected_fields adds to the list", func(t *testing.T) {
		StartDefault(t, be, "protected_fields player rank name", "require_key worlds off", "protected_fields worlds spawn", "extra_fields worlds spawn", "publish_fields worlds seed")
		WantFiltered(t, Send(t, "GET", player), player, append(slices.Clone(PlayerFields), "rank", "name")...)
		// worlds public: its default (seed) published, spawn added.
		WantFiltered(t, Send(t, "GET", "/api/v1/worlds"), "/api/v1/worlds", "spawn")
		be.WantSeen(t, "lists added to", player, "/api/v1/worlds")
	})

	t.Run("protected_fields empty list hides nothing", func(t *testing.T) {
		StartDefault(t, be, "protected_fields player")
		r := Send(t, "GET", player)
		WantFiltered(t, r, player)
		if names := MemberNames(t, r.Body); !names["op"] || !names["discord"] || Meta(t, r.Body)["hiddenFields"] != nil {
			t.Errorf("empty list: %s", r.Body)
		}
		be.WantSeen(t, "empty list", player)
	})

	t.Run("protected_fields custom field at depth in arrays", func(t *testing.T) {
		// Fields of the test backend's that the plugin's player has not:
		// named with extra_fields, as a newer plugin's would be.
		StartDefault(t, be, "protected_fields player keep ticks server", "extra_fields player keep ticks server")
		r := Send(t, "GET", player)
		WantFiltered(t, r, player, append(slices.Clone(PlayerFields), "keep", "ticks", "server")...)
		if names := MemberNames(t, r.Body); names["keep"] || names["ticks"] || names["server"] || names["op"] || !names["rank"] {
			t.Errorf("custom fields: %s", r.Body)
		}
		be.WantSeen(t, "custom fields", player)
	})

	t.Run("enable and disable", func(t *testing.T) {
		StartDefault(t, be, "disable status player", "enable whitelist")
		for _, target := range []string{"/api/v1/status", "/api/status", "/api/v1/player/" + Alex} {
			WantNotFound(t, Send(t, "GET", target), target)
			WantNotFound(t, Send(t, "GET", target, WithKey(KeyA)), target)
		}
		WantNotFound(t, Send(t, "GET", "/api/v1/whitelist"), "/api/v1/whitelist")
		be.WantSeen(t, "disabled")
		WantBackendBytes(t, Send(t, "GET", "/api/v1/whitelist", WithKey(KeyA)), "/api/v1/whitelist")
		be.WantSeen(t, "enabled whitelist", "/api/v1/whitelist")
	})

	t.Run("custom stations", func(t *testing.T) {
		StartDefault(t, be, "enable custom/votes custom/shop", "require_key custom/shop off", "protected_fields custom/shop op", "disable custom/old")
		votes, shop := "/api/v1/custom/votes", "/api/v1/custom/shop"
		WantNotFound(t, Send(t, "GET", votes), votes)
		for _, target := range []string{"/api/v1/custom/other", "/api/v1/custom/old", "/api/v1/custom", "/api/v1/custom/votes/x", "/api/v1/custom/Votes"} {
			WantNotFound(t, Send(t, "GET", target, WithKey(KeyA)), target)
		}
		be.WantSeen(t, "custom refused")
		WantBackendBytes(t, Send(t, "GET", votes, WithKey(KeyA)), votes)
		WantBackendBytes(t, Send(t, "GET", "/api/custom/votes", WithKey(KeyA)), votes)
		WantFiltered(t, Send(t, "GET", shop), shop, "op")
		be.WantSeen(t, "custom served", votes, votes, shop)
	})

	t.Run("custom station not enabled", func(t *testing.T) {
		StartDefault(t, be, "require_key custom/votes off")
		WantNotFound(t, Send(t, "GET", "/api/v1/custom/votes", WithKey(KeyA)), "/api/v1/custom/votes")
		WantNotFound(t, Send(t, "GET", "/api/v1/custom/votes"), "/api/v1/custom/votes")
		be.WantSeen(t, "custom not enabled")
	})

	t.Run("several keys", func(t *testing.T) {
		StartDefault(t, be, "key "+KeyB, "key "+KeyC)
		for _, k := range []string{KeyA, KeyB, KeyC} {
			WantBackendBytes(t, Send(t, "GET", server, WithKey(k)), server)
		}
		be.WantSeen(t, "each key", server, server, server)
		for _, k := range []string{BadKey, KeyA + KeyB, KeyA[:len(KeyA)-1], " ", KeyEnv, KeyA + ", " + KeyB} {
			WantNotFound(t, Send(t, "GET", server, WithKey(k)), server)
		}
		// The first X-API-Key header decides.
		WantNotFound(t, Send(t, "GET", server, WithKey(BadKey), WithKey(KeyA)), server)
		be.WantSeen(t, "wrong keys")
		WantBackendBytes(t, Send(t, "GET", server, WithKey(KeyB), WithKey(BadKey)), server)
		WantBackendBytes(t, Send(t, "GET", server, "x-api-key: \t"+KeyC+" \t"), server)
		be.WantSeen(t, "first header, trimmed", server, server)
	})

	t.Run("key from env", func(t *testing.T) {
		t.Setenv("STATUSGATE_TEST_KEY", KeyEnv)
		Gateway{Upstream: be.Addr(), Statusgate: []string{"key {env.STATUSGATE_TEST_KEY}"}}.Start(t)
		WantBackendBytes(t, Send(t, "GET", server, WithKey(KeyEnv)), server)
		be.WantSeen(t, "env key", server)
		WantNotFound(t, Send(t, "GET", server, WithKey("{env.STATUSGATE_TEST_KEY}")), server)
		WantNotFound(t, Send(t, "GET", server, WithKey(KeyA)), server)
		be.WantSeen(t, "not the env key")
	})

	t.Run("key from file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "apikey.txt")
		if err := os.WriteFile(file, []byte(KeyFil+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		Gateway{Upstream: be.Addr(), Statusgate: []string{"key {file." + file + "}"}}.Start(t)
		WantBackendBytes(t, Send(t, "GET", server, WithKey(KeyFil)), server)
		be.WantSeen(t, "file key", server)
		WantNotFound(t, Send(t, "GET", server, WithKey(KeyFil+"\\n")), server)
		WantNotFound(t, Send(t, "GET", server, WithKey(KeyA)), server)
		be.WantSeen(t, "not the file key")
	})
}
