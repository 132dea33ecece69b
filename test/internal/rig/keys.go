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
	return refused(t, "text/caddyfile", []byte(caddyfile))
}

// LoadJSONRefused is LoadRefused for a JSON config.
func LoadJSONRefused(t *testing.T, config []byte) string {
	t.Helper()
	return refused(t, "application/json", config)
}

// refused posts config, of the content type, to /load: Caddy's error.
func refused(t *testing.T, contentType string, config []byte) string {
	t.Helper()
	code, msg := postLoad(t, contentType, config)
	if code == http.StatusOK {
		t.Fatalf("config loaded, want it refused:\n%s", config)
	}
	if msg == "" {
		t.Fatalf("the admin API refused the config (%d) without an error message", code)
	}
	return msg
}
