package gateway

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestFieldLayer checks the field layer end to end: what an anonymous caller
// of a public endpoint gets, byte for byte where bytes matter, what a keyed
// caller gets, and what the backend was asked for.
func TestFieldLayer(t *testing.T) {
	be := NewBackend(t)
	player := "/api/v1/player/" + Alex + "?detailed=true"

	t.Run("player, anonymous", func(t *testing.T) {
		StartDefault(t, be)
		r := Send(t, "GET", player, "Accept-Encoding: gzip")
		WantFiltered(t, r, player, PlayerFields...)
		names := MemberNames(t, r.Body)
		for _, gone := range PlayerFields {
			if names[gone] {
				t.Errorf("anonymous player still has %q: %s", gone, r.Body)
			}
		}
		// Names in values and near misses stay.
		for _, kept := range []string{"role", "opx", "OP", "op ", "keep", "linked", "sessions", "since"} {
			if !names[kept] {
				t.Errorf("anonymous player lost %q: %s", kept, r.Body)
			}
		}
		// The gateway writes meta last; no protected byte before it.
		data := r.Body[:max(0, bytes.LastIndex(r.Body, []byte(`,"meta":`)))]
		for _, raw := range []string{DiscordID, `o\u0070`, `ban\u006eed`, `disc\u006frd`, `"op":`, `"banned":`, `"discord":`, `"chatplatform":`} {
			if len(data) == 0 || bytes.Contains(data, []byte(raw)) {
				t.Errorf("anonymous player has %s before meta: %s", raw, r.Body)
			}
		}
		m := Meta(t, r.Body)
		if !reflect.DeepEqual(m["hiddenFields"], []any{"op", "banned", "chatplatform", "discord"}) ||
			m["authenticated"] != false || m["server"] != "global" || m["version"] != "v1" {
			t.Errorf("anonymous player meta %v", m)
		}
		for _, raw := range []string{`"balance":1500.0`, `"since":1700001234567`, `"nickname":"§bAlexie"`} {
			if !bytes.Contains(r.Body, []byte(raw)) {
				t.Errorf("anonymous player lost the bytes %s: %s", raw, r.Body)
			}
		}
		if r.Chunked || r.Header.Get("Content-Length") != strconv.Itoa(len(r.Body)) {
			t.Errorf("small filtered body: Content-Length %q for %d bytes (chunked %v)", r.Header.Get("Content-Length"), len(r.Body), r.Chunked)
		}
		if ae := be.WantSeen(t, "anonymous player", player); len(ae) == 1 && ae[0].Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("filtered call asked the backend for Accept-Encoding %q, want identity", ae[0].Header.Get("Accept-Encoding"))
		}

		// Without detailed: hiddenFields lists what occurred, in config order.
		plain := "/api/v1/player/" + Steve
		r = Send(t, "GET", plain)
		WantFiltered(t, r, plain, PlayerFields...)
		if h := Meta(t, r.Body)["hiddenFields"]; !reflect.DeepEqual(h, []any{"op", "banned", "discord"}) {
			t.Errorf("hiddenFields %v, want [op banned discord]", h)
		}
		be.WantSeen(t, "anonymous plain player", plain)
	})

	t.Run("player, keyed", func(t *testing.T) {
		r := Send(t, "GET", player, WithKey(KeyA), "Accept-Encoding: gzip")
		WantBackendBytes(t, r, player)
		if seen := be.WantSeen(t, "keyed player", player); len(seen) == 1 && seen[0].Header.Get("Accept-Encoding") != "gzip" {
			t.Errorf("keyed call sent Accept-Encoding %q upstream, want the client's gzip", seen[0].Header.Get("Accept-Encoding"))
		}
	})

	t.Run("meta before data", func(t *testing.T) {
		be.Misbehave(SendMetaFirst)
		defer be.Misbehave(Behave)
		r := Send(t, "GET", player)
		WantFilteredFrom(t, r, "meta first", MetaFirst(BackendBody(player)), PlayerFields...)
		be.WantSeen(t, "meta first", player)
	})

	t.Run("numbers verbatim", func(t *testing.T) {
		StartDefault(t, be, "require_key worlds off", "protected_fields worlds environment", "publish_fields worlds seed", "require_key performance off")
		r := Send(t, "GET", "/api/v1/worlds")
		WantFiltered(t, r, "/api/v1/worlds", "environment")
		if n := bytes.Count(r.Body, []byte(`"seed":`+WorldSeed+`,`)); n != 2 {
			t.Errorf("the seed bytes came through %d times, want 2: %s", n, r.Body)
		}
		for _, raw := range []string{`"spawn":{"x":0.5,"y":64.0,"z":-12.0}`, `"borderSize":60000.0`} {
			if !bytes.Contains(r.Body, []byte(raw)) {
				t.Errorf("worlds lost the bytes %s: %s", raw, r.Body)
			}
		}
		r = Send(t, "GET", "/api/v1/performance")
		WantFiltered(t, r, "/api/v1/performance")
		if raw := `{"1m":19.98,"5m":20.0,"15m":20.0},"averageTickTimeMs":11.42`; !bytes.Contains(r.Body, []byte(raw)) {
			t.Errorf("performance lost the bytes %s: %s", raw, r.Body)
		}
		if Meta(t, r.Body)["hiddenFields"] != nil {
			t.Errorf("nothing removed, yet hiddenFields: %s", r.Body)
		}
		be.WantSeen(t, "numbers", "/api/v1/worlds", "/api/v1/performance")
	})

	t.Run("worlds default fields when public", func(t *testing.T) {
		StartDefault(t, be, "require_key worlds off")
		r := Send(t, "GET", "/api/v1/worlds/world")
		WantFiltered(t, r, "/api/v1/worlds/world", "seed")
		if bytes.Contains(r.Body, []byte(WorldSeed)) {
			t.Errorf("public worlds shows the seed: %s", r.Body)
		}
		be.WantSeen(t, "public worlds", "/api/v1/worlds/world")
	})

	t.Run("within max_response is held whole", func(t *testing.T) {
		StartDefault(t, be)
		be.Misbehave(SendBig)
		defer be.Misbehave(Behave)
		target := "/api/v1/player/" + Alex
		r := Send(t, "GET", target)
		WantFilteredFrom(t, r, "big player held", BigPlayerBody(), PlayerFields...)
		if r.Chunked || r.Header.Get("Content-Length") != strconv.Itoa(len(r.Body)) || len(r.Body) < 256<<10 {
			t.Errorf("big filtered body: chunked %v, Content-Length %q, %d bytes; want it whole with its length",
				r.Chunked, r.Header.Get("Content-Length"), len(r.Body))
		}
		be.WantSeen(t, "big player held", target)
	})

	t.Run("more than max_response streams", func(t *testing.T) {
		StartDefault(t, be, "max_response 256KiB")
		be.Misbehave(SendBig)
		defer be.Misbehave(Behave)
		target := "/api/v1/player/" + Alex
		r := Send(t, "GET", target)
		WantFilteredFrom(t, r, "big player", BigPlayerBody(), PlayerFields...)
		if !r.Chunked || r.Header.Get("Content-Length") != "" || len(r.Body) < 256<<10 {
			t.Errorf("big filtered body: chunked %v, Content-Length %q, %d bytes; want a stream of more than 256 KiB",
				r.Chunked, r.Header.Get("Content-Length"), len(r.Body))
		}
		if bytes.Contains(r.Body, []byte(DiscordID)) || bytes.Contains(r.Body, []byte(`"op":`)) || !bytes.Contains(r.Body, []byte(`"seed":`+WorldSeed)) {
			t.Errorf("big filtered body is wrong: %s", Clip(r.Body))
		}
		if n := bytes.Count(r.Body, []byte(`"tps":20.0}`)); n != BigSessions {
			t.Errorf("20.0 came through %d times, want %d", n, BigSessions)
		}
		WantUntouched(t, Send(t, "GET", target, WithKey(KeyA)), "keyed big player", BigPlayerBody())
		be.WantSeen(t, "big player", target, target)
	})

	t.Run("encode compresses the filtered output", func(t *testing.T) {
		Gateway{Upstream: be.Addr(), Statusgate: []string{"key " + KeyA}, Site: []string{"encode gzip"}}.Start(t)
		r := Send(t, "GET", player, "Accept-Encoding: gzip")
		if r.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("encode gzip: Content-Encoding %q; body %s", r.Header.Get("Content-Encoding"), Clip(r.Body))
		}
		r.Body = Gunzip(t, r.Body)
		WantFiltered(t, r, player, PlayerFields...)
		if seen := be.WantSeen(t, "encode", player); len(seen) == 1 && !strings.EqualFold(seen[0].Header.Get("Accept-Encoding"), "identity") {
			t.Errorf("filtered call behind encode asked for %q, want identity", seen[0].Header.Get("Accept-Encoding"))
		}
	})
}
