package gateway

import (
	"net/http"
	"strings"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// canonicalServer are the spellings of the protected /api/v1/server that parse
// to it: the versioned path, the alias and the absolute form of the former.
var canonicalServer = []string{
	"/api/v1/server",
	"/api/server",
	"http://" + GatewayAddr + "/api/v1/server",
}

// serverSpellings are other spellings of /api/v1/server (or paths the backend's
// JDK server would route to it). None of them may reach the backend, with or
// without a key: they do not parse to a known endpoint.
var serverSpellings = []string{
	// percent-encoded letters and separators
	"/api/v1/%73erver",
	"/api/v1/%73%65%72%76%65%72",
	"/api/v1/serv%65r",
	"/api/%761/server",
	"/%61pi/v1/server",
	"/api/v1%2Fserver",
	"/api%2Fv1%2Fserver",
	"/api/v1/server%2F",
	"/api/v1/%2573erver",
	// empty, '.' and '..' segments
	"//api/v1/server",
	"/api//v1/server",
	"/api/v1//server",
	"/api//server",
	"/api/v1/./server",
	"/api/./v1/server",
	"/api/./server",
	"/api/v1/%2e/server",
	"/api/v1/../v1/server",
	"/api/v1/%2e%2e/v1/server",
	"/api/v1/status/../server",
	"/api/status/../server",
	"/api/v1/player/../server",
	"/api/v1/custom/../server",
	"/api/v1/worlds/../server",
	"/api/v1/status%2F..%2Fserver",
	"/api/v1/worlds/%2e%2e",
	"/api/v1/worlds/%2E%2E",
	"/api/v1/worlds/..",
	"/api/v1/worlds/.",
	"/api/v1/worlds/..%2Fserver",
	"/api/v1/player/..%2Fserver",
	"/api/v1/v1/server",
	"/api/v1/worlds/%2e%2e%2fserver",
	"/api/v1/worlds/%2e%2e/server",
	"/api/v1/punishments/..%2F..%2Fserver",
	// ';', trailing dots, case, suffixes
	"/api/v1/server;x",
	"/api/v1/server;x=1",
	"/api/v1/server;",
	"/api/v1;x/server",
	"/api/v1/server%3Bx",
	"/api/v1/server.",
	"/api/v1/server..",
	"/api/v1/server%2e",
	"/api/v1/SERVER",
	"/api/v1/Server",
	"/API/v1/server",
	"/api/V1/server",
	"/api/v1/server/",
	"/api/v1/server//",
	"/api/v1/server/x",
	"/api/v1/serverx",
	// back slashes
	"/api/v1%5Cserver",
	"/api/v1/%5Cserver",
	"/api\\v1\\server",
	"/api/v1/worlds/..%5Cserver",
	// null bytes, white space
	"/api/v1/server%00",
	"/api/v1/%00server",
	"/api/v1/worlds/%00",
	"/api/v1/server%20",
	"/api/v1/server%09",
	// unicode lookalikes: Cyrillic ѕ (U+0455), fullwidth ｓ, both raw and encoded
	"/api/v1/ѕerver",
	"/api/v1/%D1%95erver",
	"/api/v1/ｓerver",
	"/api/v1/%EF%BD%93erver",
	"/api/v1/ſerver", // U+017F, which upper-cases to S
}

// TestPathSpellings sends every spelling of the protected /api/v1/server over
// raw TCP and checks that none reaches the backend: 404 without a key, 401 for
// the canonical spellings only when hide_protected is off, and still 404 with a
// key for the spellings that are not canonical.
func TestPathSpellings(t *testing.T) {
	be := NewBackend(t)

	t.Run("hide_protected on", func(t *testing.T) {
		StartDefault(t, be)
		for _, target := range append(canonicalServer, serverSpellings...) {
			WantNotFound(t, Send(t, "GET", target), target)
			WantNotFound(t, Send(t, "GET", target, WithKey(BadKey)), target)
			be.WantSeen(t, "no key: "+target)
		}
		for _, target := range serverSpellings {
			WantNotFound(t, Send(t, "GET", target, WithKey(KeyA)), target)
			be.WantSeen(t, "keyed: "+target)
		}
		for _, target := range canonicalServer {
			WantBackendBytes(t, Send(t, "GET", target, WithKey(KeyA)), "/api/v1/server")
			be.WantSeen(t, "keyed: "+target, "/api/v1/server")
		}
	})

	t.Run("hide_protected off", func(t *testing.T) {
		StartDefault(t, be, "hide_protected off")
		for _, target := range canonicalServer {
			WantError(t, Send(t, "GET", target), http.StatusUnauthorized, DecodedPath(t, target))
		}
		for _, target := range serverSpellings {
			WantNotFound(t, Send(t, "GET", target), target)
		}
		be.WantSeen(t, "hide_protected off")
	})

	t.Run("refused by net/http", func(t *testing.T) {
		// Raw control characters in the request line never get as far as Caddy.
		StartDefault(t, be)
		for _, target := range []string{"/api/v1/server\x00", "/api/v1/\x00server", "/api/v1/server\x7f"} {
			r := Send(t, "GET", target, WithKey(KeyA))
			if r.Status != http.StatusBadRequest || !strings.HasPrefix(string(r.Body), "400 Bad Request") {
				t.Errorf("%q: %d %s, want net/http's 400", target, r.Status, r.Body)
			}
		}
		be.WantSeen(t, "raw control characters")
	})

	t.Run("a '#' is the gateway's 400", func(t *testing.T) {
		// A target with a '#' is refused before the route (TestQueryKeyNeverLogged).
		StartDefault(t, be)
		for _, target := range []string{"/api/v1/server#x", "/api/v1/server#", "/api/v1/ser#ver"} {
			WantError(t, Send(t, "GET", target, WithKey(KeyA)), http.StatusBadRequest, DecodedPath(t, target))
			WantError(t, Send(t, "GET", target), http.StatusBadRequest, DecodedPath(t, target))
		}
		be.WantSeen(t, "'#'")
	})
}

// TestRawSpellingWithUnescapedBytes: net/url's EscapedPath forgets the raw
// spelling when the path holds a byte it would escape ('{', '|', ...) and
// re-escapes the decoded path, which turned %77orlds back into worlds. The
// gateway routes on the client's own spelling, so these stay unknown: 404,
// never forwarded.
func TestRawSpellingWithUnescapedBytes(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be)
	for _, target := range []string{
		"/api/v1/%77orlds/world",
		"/api/v1/%73erver{",
		"/api/v1/%77orlds/x{",
		"/api/%761/worlds/x{",
		"/api/v1%2Fworlds/x{",
		"/api/%77orlds/a|b",
	} {
		WantNotFound(t, Send(t, "GET", target, WithKey(KeyA)), target)
		be.WantSeen(t, target)
	}
}
