package rig

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// LoadRefused posts a Caddyfile to the admin API's /load, as caddy reload
// does, and returns the error message Caddy answers; the test fails if Caddy
// takes the config.
func LoadRefused(t *testing.T, caddyfile string) string {
	t.Helper()
	res, err := AdminClient.Post(AdminURL+"/load", "text/caddyfile", strings.NewReader(caddyfile))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode == http.StatusOK {
		t.Fatalf("config loaded, want it refused:\n%s", caddyfile)
	}
	var answer struct{ Error string }
	if err := json.Unmarshal(body, &answer); err != nil || answer.Error == "" {
		t.Fatalf("admin API's answer %s: %v", body, err)
	}
	return answer.Error
}
