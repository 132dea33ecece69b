package rig

import (
	"bytes"
	"encoding/json"
	"io"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
)

// Adapt is the JSON of a Caddyfile, compact, as Caddy's adapter writes it.
func Adapt(t *testing.T, caddyfile string) []byte {
	t.Helper()
	adapted, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(caddyfile), nil)
	if err != nil {
		t.Fatalf("adapting the config: %v", err)
	}
	return adapted
}

// PostJSON posts a JSON config to the admin API's /load, as a config
// management tool does, and returns the status and Caddy's error message.
func PostJSON(t *testing.T, config []byte) (int, string) {
	t.Helper()
	return postLoad(t, "application/json", config)
}

// PostCaddyfile posts a Caddyfile to the admin API's /load, as caddy
// reload does, and returns the status and Caddy's error message.
func PostCaddyfile(t *testing.T, caddyfile string) (int, string) {
	t.Helper()
	return postLoad(t, "text/caddyfile", []byte(caddyfile))
}

// postLoad posts config, of the content type, to the admin API's /load.
func postLoad(t *testing.T, contentType string, config []byte) (int, string) {
	t.Helper()
	res, err := AdminClient.Post(AdminURL+"/load", contentType, bytes.NewReader(config))
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var answer struct{ Error string }
	body, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(body, &answer)
	return res.StatusCode, answer.Error
}
