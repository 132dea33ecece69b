package test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"
)

// TestOptions loads one config per option of the statusgate block and checks
// what each changes, for the client and at the backend.
func TestOptions(t *testing.T) {
	be := newBackend(t)
	server, player := "/api/v1/server", "/api/v1/player/"+alex+"?detailed=true"
	const votes = "/api/v1/custom/votes"

	t.Run("auth off", func(t *testing.T) {
		startDefault(t, be, "auth off", "require_key status on", "protected_fields status online", "enable custom/votes")
		// Everything public, nothing filtered, the backend's meta.authenticated true.
		for _, target := range []string{server, player, "/api/v1/status", "/api/v1/bans"} {
			wantBackendBytes(t, send(t, "GET", target), target)
			be.wantSeen(t, target, target)
		}
		// The key is still stripped from the upstream request, header and
		// query (a custom station's, which keeps the rest of it).
		wantBackendBytes(t, send(t, "GET", votes+"?key="+keyA+"&x=1", withKey(keyA)), votes+"?x=1")
		be.wantSeen(t, "keyed, auth off", votes+"?x=1")
		// Disabled stays disabled.
		wantNotFound(t, send(t, "GET", "/api/v1/whitelist"), "/api/v1/whitelist")
		be.wantSeen(t, "whitelist, auth off")
	})

	t.Run("allow_query_key on", func(t *testing.T) {
		startDefault(t, be, "allow_query_key", "enable custom/votes")
		for _, c := range []struct{ target, upstream string }{
			{server + "?key=" + keyA, server},
			{server + "?a=1&key=" + keyA + "&b=2", server},
			{votes + "?a=1&key=" + keyA + "&b=2", votes + "?a=1&b=2"},
			{votes + "?k%65y=" + keyA + "&b=%20", votes + "?b=%20"},
		} {
			wantBackendBytes(t, send(t, "GET", c.target), c.upstream)
			be.wantSeen(t, c.target, c.upstream)
		}
		// The header wins when both are present, either way round.
		wantNotFound(t, send(t, "GET", server+"?key="+keyA, withKey(badKey)), server)
		be.wantSeen(t, "bad header, good query")
		wantBackendBytes(t, send(t, "GET", server+"?key="+badKey, withKey(keyA)), server)
		be.wantSeen(t, "good header, bad query", server)
		// An empty header still decides.
		wantNotFound(t, send(t, "GET", server+"?key="+keyA, "X-API-Key:"), server)
		wantNotFound(t, send(t, "GET", server+"?key="+badKey), server)
		be.wantSeen(t, "refused query keys")
		// A public endpoint with a query key: unfiltered, key stripped.
		wantBackendBytes(t, send(t, "GET", player+"&key="+keyA), player)
		be.wantSeen(t, "public with query key", player)
	})

	t.Run("allow_query_key off", func(t *testing.T) {
		startDefault(t, be, "allow_query_key off")
		wantNotFound(t, send(t, "GET", server+"?key="+keyA), server)
		wantNotFound(t, send(t, "GET", server+"?k%65y="+keyA), server)
		be.wantSeen(t, "query key, off")
		// Does not authenticate on a public endpoint either, and is stripped.
		target := "/api/v1/player/" + alex + "?key=" + keyA + "&detailed=true&k%65y=" + keyA + "&KEY=x"
		wantFiltered(t, send(t, "GET", target), player, playerFields...)
		be.wantSeen(t, "public, query key, off", player)
	})

	t.Run("hide_protected off", func(t *testing.T) {
		startDefault(t, be, "hide_protected off")
		wantError(t, send(t, "GET", server), http.StatusUnauthorized, server)
		wantError(t, send(t, "GET", "/api/bans", withKey(badKey)), http.StatusUnauthorized, "/api/bans")
		wantNotFound(t, send(t, "GET", "/api/v1/nothing"), "/api/v1/nothing")
		wantNotFound(t, send(t, "GET", "/api/v1/whitelist"), "/api/v1/whitelist")
		wantError(t, send(t, "POST", server), http.StatusUnauthorized, server) // the key before the method
		be.wantSeen(t, "hide_protected off")
		wantBackendBytes(t, send(t, "GET", server, withKey(keyA)), server)
		be.wantSeen(t, "keyed, hide off", server)
	})

	t.Run("require_key", func(t *testing.T) {
		startDefault(t, be, "require_key server off", "require_key status on")
		// server public: its default protected fields go, in config order.
		wantFiltered(t, send(t, "GET", server), server, "motd", "ip", "port")
		be.wantSeen(t, "public server", server)
		wantBackendBytes(t, send(t, "GET", server, withKey(keyA)), server)
		be.wantSeen(t, "keyed server", server)
		wantNotFound(t, send(t, "GET", "/api/v1/status"), "/api/v1/status")
		be.wantSeen(t, "protected status")
		wantBackendBytes(t, send(t, "GET", "/api/v1/status", withKey(keyA)), "/api/v1/status")
		be.wantSeen(t, "keyed status", "/api/v1/status")
	})

	t.Run("protected_fields replaces the list", func(t *testing.T) {
		startDefault(t, be, "protected_fields player rank name", "require_key worlds off", "protected_fields worlds spawn", "extra_fields worlds spawn")
		wantFiltered(t, send(t, "GET", player), player, "rank", "name")
		// worlds public: its default (seed) replaced by spawn.
		wantFiltered(t, send(t, "GET", "/api/v1/worlds"), "/api/v1/worlds", "spawn")
		be.wantSeen(t, "replaced lists", player, "/api/v1/worlds")
	})

	t.Run("protected_fields empty list hides nothing", func(t *testing.T) {
		startDefault(t, be, "protected_fields player")
		r := send(t, "GET", player)
		wantFiltered(t, r, player)
		if names := memberNames(t, r.Body); !names["op"] || !names["discord"] || meta(t, r.Body)["hiddenFields"] != nil {
			t.Errorf("empty list: %s", r.Body)
		}
		be.wantSeen(t, "empty list", player)
	})

	t.Run("protected_fields custom field at depth in arrays", func(t *testing.T) {
		// Fields of the test backend's that the plugin's player has not:
		// named with extra_fields, as a newer plugin's would be.
		startDefault(t, be, "protected_fields player keep ticks server", "extra_fields player keep ticks server")
		r := send(t, "GET", player)
		wantFiltered(t, r, player, "keep", "ticks", "server")
		if names := memberNames(t, r.Body); names["keep"] || names["ticks"] || names["server"] || !names["op"] {
			t.Errorf("custom fields: %s", r.Body)
		}
		be.wantSeen(t, "custom fields", player)
	})

	t.Run("enable and disable", func(t *testing.T) {
		startDefault(t, be, "disable status player", "enable whitelist")
		for _, target := range []string{"/api/v1/status", "/api/status", "/api/v1/player/" + alex} {
			wantNotFound(t, send(t, "GET", target), target)
			wantNotFound(t, send(t, "GET", target, withKey(keyA)), target)
		}
		wantNotFound(t, send(t, "GET", "/api/v1/whitelist"), "/api/v1/whitelist")
		be.wantSeen(t, "disabled")
		wantBackendBytes(t, send(t, "GET", "/api/v1/whitelist", withKey(keyA)), "/api/v1/whitelist")
		be.wantSeen(t, "enabled whitelist", "/api/v1/whitelist")
	})

	t.Run("custom stations", func(t *testing.T) {
		startDefault(t, be, "enable custom/votes custom/shop", "require_key custom/shop off", "protected_fields custom/shop op", "disable custom/old")
		votes, shop := "/api/v1/custom/votes", "/api/v1/custom/shop"
		wantNotFound(t, send(t, "GET", votes), votes)
		for _, target := range []string{"/api/v1/custom/other", "/api/v1/custom/old", "/api/v1/custom", "/api/v1/custom/votes/x", "/api/v1/custom/Votes"} {
			wantNotFound(t, send(t, "GET", target, withKey(keyA)), target)
		}
		be.wantSeen(t, "custom refused")
		wantBackendBytes(t, send(t, "GET", votes, withKey(keyA)), votes)
		wantBackendBytes(t, send(t, "GET", "/api/custom/votes", withKey(keyA)), votes)
		wantFiltered(t, send(t, "GET", shop), shop, "op")
		be.wantSeen(t, "custom served", votes, votes, shop)
	})

	t.Run("custom station not enabled", func(t *testing.T) {
		startDefault(t, be, "require_key custom/votes off")
		wantNotFound(t, send(t, "GET", "/api/v1/custom/votes", withKey(keyA)), "/api/v1/custom/votes")
		wantNotFound(t, send(t, "GET", "/api/v1/custom/votes"), "/api/v1/custom/votes")
		be.wantSeen(t, "custom not enabled")
	})

	t.Run("several keys", func(t *testing.T) {
		startDefault(t, be, "key "+keyB, "key "+keyC)
		for _, k := range []string{keyA, keyB, keyC} {
			wantBackendBytes(t, send(t, "GET", server, withKey(k)), server)
		}
		be.wantSeen(t, "each key", server, server, server)
		for _, k := range []string{badKey, keyA + keyB, keyA[:len(keyA)-1], " ", keyEnv, keyA + ", " + keyB} {
			wantNotFound(t, send(t, "GET", server, withKey(k)), server)
		}
		// The first X-API-Key header decides.
		wantNotFound(t, send(t, "GET", server, withKey(badKey), withKey(keyA)), server)
		be.wantSeen(t, "wrong keys")
		wantBackendBytes(t, send(t, "GET", server, withKey(keyB), withKey(badKey)), server)
		wantBackendBytes(t, send(t, "GET", server, "x-api-key: \t"+keyC+" \t"), server)
		be.wantSeen(t, "first header, trimmed", server, server)
	})

	t.Run("key from env", func(t *testing.T) {
		t.Setenv("STATUSGATE_TEST_KEY", keyEnv)
		gateway{upstream: be.addr(), statusgate: []string{"key {env.STATUSGATE_TEST_KEY}"}}.start(t)
		wantBackendBytes(t, send(t, "GET", server, withKey(keyEnv)), server)
		be.wantSeen(t, "env key", server)
		wantNotFound(t, send(t, "GET", server, withKey("{env.STATUSGATE_TEST_KEY}")), server)
		wantNotFound(t, send(t, "GET", server, withKey(keyA)), server)
		be.wantSeen(t, "not the env key")
	})

	t.Run("key from file", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "apikey.txt")
		if err := os.WriteFile(file, []byte(keyFil+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		gateway{upstream: be.addr(), statusgate: []string{"key {file." + file + "}"}}.start(t)
		wantBackendBytes(t, send(t, "GET", server, withKey(keyFil)), server)
		be.wantSeen(t, "file key", server)
		wantNotFound(t, send(t, "GET", server, withKey(keyFil+"\\n")), server)
		wantNotFound(t, send(t, "GET", server, withKey(keyA)), server)
		be.wantSeen(t, "not the file key")
	})
}
