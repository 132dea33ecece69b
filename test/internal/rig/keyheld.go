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
// A load that is refused returns once the refused config's listeners are
// closed (awaitRefused): from then on, every new connection reaches the
// running config.
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
	if res.StatusCode != 200 {
		awaitRefused(t)
	}
	return res.StatusCode, answer.Error
}

// awaitRefused returns once the listeners of a config that was just refused
// are closed, which leaves only the running config's. Caddy starts a load's
// apps in no set order: when the HTTP app started before another app
// refused the load, its servers listened, and /load answers as soon as
// their shutdown has begun, not ended. Until a refused server's socket is
// closed the kernel can hand it a new connection (SO_REUSEPORT), which Go's
// server, shutting down, closes unanswered once it has read the request
// (the client reads EOF), or which is reset when the socket closes. The
// running config is the admin API's, and its listeners are waited for as
// after a load that succeeded (AwaitOldListeners).
func awaitRefused(t *testing.T) {
	t.Helper()
	res, err := AdminClient.Get(AdminURL + "/config/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	running, err := io.ReadAll(res.Body)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("reading the running config after a refused load: %d %v", res.StatusCode, err)
	}
	AwaitOldListeners(t, running)
}
