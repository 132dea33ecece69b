package rig

import (
	"net/http"
	"testing"
)

// LoadRefused posts a Caddyfile to the admin API's /load, as caddy reload
// does, and returns the error message Caddy answers; the test fails if Caddy
// takes the config.
func LoadRefused(t *testing.T, caddyfile string) string {
	t.Helper()
	code, msg := PostCaddyfile(t, caddyfile)
	if code == http.StatusOK {
		t.Fatalf("config loaded, want it refused:\n%s", caddyfile)
	}
	if msg == "" {
		t.Fatalf("the admin API refused the config (%d) without an error message", code)
	}
	return msg
}
