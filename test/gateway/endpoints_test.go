package gateway

import (
	"net/http"
	"reflect"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// protectedTargets are canonical requests to every endpoint that needs a key
// by default, each as the backend must receive it.
var protectedTargets = []string{
	"/api/v1/server",
	"/api/v1/performance",
	"/api/v1/worlds",
	"/api/v1/worlds/world",
	"/api/v1/worlds/my%20world",
	"/api/v1/gamerules",
	"/api/v1/entities",
	"/api/v1/spawnlimits",
	"/api/v1/punishments",
	"/api/v1/punishments/" + Steve,
	"/api/v1/bans",
	"/api/v1/operators",
	"/api/v1/plugins",
	"/api/v1/placeholders?uuid=" + Alex + "&p=%25player_name%25",
	"/api/v1/constants",
}

// TestEveryEndpoint runs every endpoint anonymously and with a key under the
// default config and checks status, body and the exact request the backend got.
func TestEveryEndpoint(t *testing.T) {
	be := NewBackend(t)
	StartDefault(t, be)

	t.Run("public", func(t *testing.T) {
		for _, c := range []struct {
			target string
			fields []string
		}{
			{"/api/v1/status", nil},
			{"/api/v1/status?history=true", nil},
			{"/api/v1/player/" + Alex, PlayerFields},
			{"/api/v1/player/" + Steve + "?detailed=true", PlayerFields},
		} {
			WantFiltered(t, Send(t, "GET", c.target), c.target, c.fields...)
			seen := be.WantSeen(t, "anonymous "+c.target, c.target)
			if len(seen) == 1 && seen[0].Header.Get("Accept-Encoding") != "identity" {
				t.Errorf("%s: filtered call sent Accept-Encoding %q upstream, want identity", c.target, seen[0].Header.Get("Accept-Encoding"))
			}
			WantBackendBytes(t, Send(t, "GET", c.target, WithKey(KeyA)), c.target)
			be.WantSeen(t, "keyed "+c.target, c.target)
		}
	})

	t.Run("protected", func(t *testing.T) {
		for _, target := range protectedTargets {
			WantNotFound(t, Send(t, "GET", target), target)
			be.WantSeen(t, "anonymous "+target)
			WantNotFound(t, Send(t, "GET", target, WithKey(BadKey)), target)
			be.WantSeen(t, "bad key "+target)
			WantBackendBytes(t, Send(t, "GET", target, WithKey(KeyA)), target)
			be.WantSeen(t, "keyed "+target, target)
		}
	})

	t.Run("disabled by default", func(t *testing.T) {
		for _, target := range []string{"/api/v1/whitelist", "/api/v1/network", "/api/whitelist", "/api/v1/custom/votes"} {
			WantNotFound(t, Send(t, "GET", target), target)
			WantNotFound(t, Send(t, "GET", target, WithKey(KeyA)), target)
			be.WantSeen(t, target)
		}
	})

	t.Run("alias", func(t *testing.T) {
		WantFiltered(t, Send(t, "GET", "/api/status"), "/api/v1/status")
		be.WantSeen(t, "/api/status", "/api/v1/status")
		WantFiltered(t, Send(t, "GET", "/api/player/"+Alex+"?detailed=true"), "/api/v1/player/"+Alex+"?detailed=true", PlayerFields...)
		be.WantSeen(t, "/api/player", "/api/v1/player/"+Alex+"?detailed=true")
		WantNotFound(t, Send(t, "GET", "/api/server"), "/api/server")
		be.WantSeen(t, "anonymous /api/server")
		WantBackendBytes(t, Send(t, "GET", "/api/server", WithKey(KeyA)), "/api/v1/server")
		WantBackendBytes(t, Send(t, "GET", "/api/worlds/world", WithKey(KeyA)), "/api/v1/worlds/world")
		be.WantSeen(t, "keyed alias", "/api/v1/server", "/api/v1/worlds/world")
	})

	t.Run("backend 404 passes through", func(t *testing.T) {
		target := "/api/v1/worlds/atlantis"
		r := Send(t, "GET", target, WithKey(KeyA))
		if want := ErrorEnvelope(404, "World not found: atlantis", target); r.Status != 404 || string(r.Body) != string(want) {
			t.Errorf("keyed unknown world: %d %s, want 404 %s", r.Status, r.Body, want)
		}
		be.WantSeen(t, target, target)
	})
}

// station is one entry of the index as a test expects it.
type station struct {
	name        string
	path        string
	requiresKey bool
}

var (
	stStatus = station{"status", "/api/v1/status", false}
	stPlayer = station{"player", "/api/v1/player/{uuid}", false}
	// the protected endpoints enabled by default, in the plugin's endpoint order
	stProtected = []station{
		{"server", "/api/v1/server", true},
		{"performance", "/api/v1/performance", true},
		{"worlds", "/api/v1/worlds", true},
		{"gamerules", "/api/v1/gamerules", true},
		{"entities", "/api/v1/entities", true},
		{"spawnlimits", "/api/v1/spawnlimits", true},
		{"punishments", "/api/v1/punishments", true},
		{"bans", "/api/v1/bans", true},
		{"operators", "/api/v1/operators", true},
		{"plugins", "/api/v1/plugins", true},
		{"placeholders", "/api/v1/placeholders", true},
		{"constants", "/api/v1/constants", true},
	}
)

// wantIndex asserts the gateway's index: 200, the fixed data, the stations in
// order with their flags, meta.authenticated and the JSON headers.
func wantIndex(t testing.TB, r Response, authEnabled, authenticated bool, stations ...station) {
	t.Helper()
	if r.Status != http.StatusOK || r.Err != nil {
		t.Errorf("index: %d %s (err %v), want 200", r.Status, r.Body, r.Err)
		return
	}
	var got struct {
		OK   bool `json:"ok"`
		Data struct {
			Name        string `json:"name"`
			APIVersion  string `json:"apiVersion"`
			AuthEnabled bool   `json:"authEnabled"`
			Versions    []any  `json:"versions"`
			Alias       string `json:"alias"`
			Stations    []struct {
				Name        string `json:"name"`
				Path        string `json:"path"`
				Description string `json:"description"`
				RequiresKey bool   `json:"requiresKey"`
			} `json:"stations"`
		} `json:"data"`
		Meta map[string]any `json:"meta"`
	}
	if err := JSONUnmarshalStrict(r.Body, &got); err != nil {
		t.Errorf("index: %v: %s", err, r.Body)
		return
	}
	d := got.Data
	wantVersions := []any{map[string]any{"version": "v1", "path": "/api/v1", "current": true}}
	if !got.OK || d.Name != "statusgate" || d.APIVersion != "1.1.0" || d.AuthEnabled != authEnabled ||
		d.Alias != "/api → /api/v1" || !reflect.DeepEqual(d.Versions, wantVersions) {
		t.Errorf("index data: %s", r.Body)
	}
	var list []station
	for _, s := range d.Stations {
		list = append(list, station{s.Name, s.Path, s.RequiresKey})
		if s.Description == "" {
			t.Errorf("index: station %s has no description", s.Name)
		}
	}
	if !reflect.DeepEqual(list, stations) {
		t.Errorf("index stations\n got %v\nwant %v", list, stations)
	}
	if got.Meta["version"] != "v1" || got.Meta["authenticated"] != authenticated || got.Meta["updatedAt"] == nil {
		t.Errorf("index meta %v, want authenticated %v", got.Meta, authenticated)
	}
	WantJSONHeaders(t, r, "index")
}

// TestIndex checks the index the gateway writes itself, for every caller and
// config that changes it; the backend never sees a request for it.
func TestIndex(t *testing.T) {
	be := NewBackend(t)
	spellings := []string{"/api/v1", "/api/v1/", "/api", "/api/"}
	all := append([]station{stStatus, stPlayer}, stProtected...)
	check := func(t *testing.T, authEnabled, authenticated bool, header []string, stations ...station) {
		t.Helper()
		for _, target := range spellings {
			wantIndex(t, Send(t, "GET", target, header...), authEnabled, authenticated, stations...)
		}
		be.WantSeen(t, "index")
	}

	t.Run("default", func(t *testing.T) {
		StartDefault(t, be)
		check(t, true, false, nil, stStatus, stPlayer)
		check(t, true, false, []string{WithKey(BadKey)}, stStatus, stPlayer)
		check(t, true, true, []string{WithKey(KeyA)}, all...)
		WantNotFound(t, Send(t, "GET", "/api/v1/index", WithKey(KeyA)), "/api/v1/index")
		be.WantSeen(t, "/api/v1/index")
	})

	t.Run("enabled, disabled and custom", func(t *testing.T) {
		StartDefault(t, be, "enable whitelist custom/votes", "disable status", "require_key server off")
		keyed := []station{stPlayer, {"server", "/api/v1/server", false}}
		keyed = append(keyed, stProtected[1:9]...)
		keyed = append(keyed, station{"whitelist", "/api/v1/whitelist", true})
		keyed = append(keyed, stProtected[9:]...)
		keyed = append(keyed, station{"custom/votes", "/api/v1/custom/votes", true})
		check(t, true, true, []string{WithKey(KeyA)}, keyed...)
		check(t, true, false, nil, stPlayer, station{"server", "/api/v1/server", false})
	})

	t.Run("hide_protected off", func(t *testing.T) {
		StartDefault(t, be, "hide_protected off")
		check(t, true, false, nil, all...)
	})

	t.Run("protected_fields on the index", func(t *testing.T) {
		StartDefault(t, be, "protected_fields index description")
		r := Send(t, "GET", "/api/v1")
		if names := MemberNames(t, r.Body); r.Status != 200 || names["description"] || !names["requiresKey"] {
			t.Errorf("anonymous index with description protected: %d %s", r.Status, r.Body)
		}
		if m := Meta(t, r.Body); !reflect.DeepEqual(m["hiddenFields"], []any{"description"}) || m["authenticated"] != false {
			t.Errorf("anonymous index meta %v", m)
		}
		wantIndex(t, Send(t, "GET", "/api/v1", WithKey(KeyA)), true, true, all...)
		be.WantSeen(t, "index with protected fields")
	})

	t.Run("auth off", func(t *testing.T) {
		StartDefault(t, be, "auth off")
		var open []station
		for _, s := range all {
			open = append(open, station{s.name, s.path, false})
		}
		check(t, false, true, nil, open...)
		check(t, false, true, []string{WithKey(KeyA)}, open...)
		// A custom station is as open as the rest.
		StartDefault(t, be, "auth off", "enable custom/votes")
		check(t, false, true, nil, append(open, station{"custom/votes", "/api/v1/custom/votes", false})...)
	})
}
