package test

import (
	"bytes"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// TestFieldLayer checks the field layer end to end: what an anonymous caller
// of a public endpoint gets, byte for byte where bytes matter, what a keyed
// caller gets, and what the backend was asked for.
func TestFieldLayer(t *testing.T) {
	be := newBackend(t)
	player := "/api/v1/player/" + alex + "?detailed=true"

	t.Run("player, anonymous", func(t *testing.T) {
		startDefault(t, be)
		r := send(t, "GET", player, "Accept-Encoding: gzip")
		wantFiltered(t, r, player, playerFields...)
		names := memberNames(t, r.Body)
		for _, gone := range playerFields {
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
		for _, raw := range []string{discordID, `o\u0070`, `ban\u006eed`, `disc\u006frd`, `"op":`, `"banned":`, `"discord":`, `"chatplatform":`} {
			if len(data) == 0 || bytes.Contains(data, []byte(raw)) {
				t.Errorf("anonymous player has %s before meta: %s", raw, r.Body)
			}
		}
		m := meta(t, r.Body)
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
		if ae := be.wantSeen(t, "anonymous player", player); len(ae) == 1 && ae[0].Header.Get("Accept-Encoding") != "identity" {
			t.Errorf("filtered call asked the backend for Accept-Encoding %q, want identity", ae[0].Header.Get("Accept-Encoding"))
		}

		// Without detailed: hiddenFields lists what occurred, in config order.
		plain := "/api/v1/player/" + steve
		r = send(t, "GET", plain)
		wantFiltered(t, r, plain, playerFields...)
		if h := meta(t, r.Body)["hiddenFields"]; !reflect.DeepEqual(h, []any{"op", "banned", "discord"}) {
			t.Errorf("hiddenFields %v, want [op banned discord]", h)
		}
		be.wantSeen(t, "anonymous plain player", plain)
	})

	t.Run("player, keyed", func(t *testing.T) {
		r := send(t, "GET", player, withKey(keyA), "Accept-Encoding: gzip")
		wantBackendBytes(t, r, player)
		if seen := be.wantSeen(t, "keyed player", player); len(seen) == 1 && seen[0].Header.Get("Accept-Encoding") != "gzip" {
			t.Errorf("keyed call sent Accept-Encoding %q upstream, want the client's gzip", seen[0].Header.Get("Accept-Encoding"))
		}
	})

	t.Run("meta before data", func(t *testing.T) {
		be.misbehave(sendMetaFirst)
		defer be.misbehave(behave)
		r := send(t, "GET", player)
		wantFilteredFrom(t, r, "meta first", metaFirst(backendBody(player)), playerFields...)
		be.wantSeen(t, "meta first", player)
	})

	t.Run("numbers verbatim", func(t *testing.T) {
		startDefault(t, be, "require_key worlds off", "protected_fields worlds environment", "require_key performance off")
		r := send(t, "GET", "/api/v1/worlds")
		wantFiltered(t, r, "/api/v1/worlds", "environment")
		if n := bytes.Count(r.Body, []byte(`"seed":`+worldSeed+`,`)); n != 2 {
			t.Errorf("the seed bytes came through %d times, want 2: %s", n, r.Body)
		}
		for _, raw := range []string{`"spawn":{"x":0.5,"y":64.0,"z":-12.0}`, `"borderSize":60000.0`} {
			if !bytes.Contains(r.Body, []byte(raw)) {
				t.Errorf("worlds lost the bytes %s: %s", raw, r.Body)
			}
		}
		r = send(t, "GET", "/api/v1/performance")
		wantFiltered(t, r, "/api/v1/performance")
		if raw := `{"1m":19.98,"5m":20.0,"15m":20.0},"averageTickTimeMs":11.42`; !bytes.Contains(r.Body, []byte(raw)) {
			t.Errorf("performance lost the bytes %s: %s", raw, r.Body)
		}
		if meta(t, r.Body)["hiddenFields"] != nil {
			t.Errorf("nothing removed, yet hiddenFields: %s", r.Body)
		}
		be.wantSeen(t, "numbers", "/api/v1/worlds", "/api/v1/performance")
	})

	t.Run("worlds default fields when public", func(t *testing.T) {
		startDefault(t, be, "require_key worlds off")
		r := send(t, "GET", "/api/v1/worlds/world")
		wantFiltered(t, r, "/api/v1/worlds/world", "seed")
		if bytes.Contains(r.Body, []byte(worldSeed)) {
			t.Errorf("public worlds shows the seed: %s", r.Body)
		}
		be.wantSeen(t, "public worlds", "/api/v1/worlds/world")
	})

	t.Run("within max_response is held whole", func(t *testing.T) {
		startDefault(t, be)
		be.misbehave(sendBig)
		defer be.misbehave(behave)
		target := "/api/v1/player/" + alex
		r := send(t, "GET", target)
		wantFilteredFrom(t, r, "big player held", bigPlayerBody(), playerFields...)
		if r.Chunked || r.Header.Get("Content-Length") != strconv.Itoa(len(r.Body)) || len(r.Body) < 256<<10 {
			t.Errorf("big filtered body: chunked %v, Content-Length %q, %d bytes; want it whole with its length",
				r.Chunked, r.Header.Get("Content-Length"), len(r.Body))
		}
		be.wantSeen(t, "big player held", target)
	})

	t.Run("more than max_response streams", func(t *testing.T) {
		startDefault(t, be, "max_response 256KiB")
		be.misbehave(sendBig)
		defer be.misbehave(behave)
		target := "/api/v1/player/" + alex
		r := send(t, "GET", target)
		wantFilteredFrom(t, r, "big player", bigPlayerBody(), playerFields...)
		if !r.Chunked || r.Header.Get("Content-Length") != "" || len(r.Body) < 256<<10 {
			t.Errorf("big filtered body: chunked %v, Content-Length %q, %d bytes; want a stream of more than 256 KiB",
				r.Chunked, r.Header.Get("Content-Length"), len(r.Body))
		}
		if bytes.Contains(r.Body, []byte(discordID)) || bytes.Contains(r.Body, []byte(`"op":`)) || !bytes.Contains(r.Body, []byte(`"seed":`+worldSeed)) {
			t.Errorf("big filtered body is wrong: %s", clip(r.Body))
		}
		if n := bytes.Count(r.Body, []byte(`"tps":20.0}`)); n != bigSessions {
			t.Errorf("20.0 came through %d times, want %d", n, bigSessions)
		}
		wantUntouched(t, send(t, "GET", target, withKey(keyA)), "keyed big player", bigPlayerBody())
		be.wantSeen(t, "big player", target, target)
	})

	t.Run("encode compresses the filtered output", func(t *testing.T) {
		gateway{upstream: be.addr(), statusgate: []string{"key " + keyA}, site: []string{"encode gzip"}}.start(t)
		r := send(t, "GET", player, "Accept-Encoding: gzip")
		if r.Header.Get("Content-Encoding") != "gzip" {
			t.Fatalf("encode gzip: Content-Encoding %q; body %s", r.Header.Get("Content-Encoding"), clip(r.Body))
		}
		r.Body = gunzip(t, r.Body)
		wantFiltered(t, r, player, playerFields...)
		if seen := be.wantSeen(t, "encode", player); len(seen) == 1 && !strings.EqualFold(seen[0].Header.Get("Accept-Encoding"), "identity") {
			t.Errorf("filtered call behind encode asked for %q, want identity", seen[0].Header.Get("Accept-Encoding"))
		}
	})
}
