package gateway

import (
	"reflect"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestFieldListAddsToDefaults: `protected_fields player uuid` (meant: also
// hide the UUID) keeps op, banned and discord, which the defaults hide, and
// rank, which the global statusgate option hides, from anonymous callers,
// and hides the UUID too; a keyed caller still gets every field, and
// publish_fields, naming the field, makes one public. Before, the line
// replaced the defaults and the global option's list: an anonymous caller
// got op, banned, rank and the linked Discord ID.
func TestFieldListAddsToDefaults(t *testing.T) {
	be := NewBackend(t)
	player := "/api/v1/player/" + Alex
	global := []string{"log {\n\t\tlevel ERROR\n\t}", "statusgate {\n\t\tprotected_fields player rank\n\t}"}
	Gateway{Upstream: be.Addr(), Global: global, Statusgate: []string{"key " + KeyA, "protected_fields player uuid"}}.Start(t)

	r := Send(t, "GET", player)
	be.WantSeen(t, "anonymous player", player)
	names := MemberNames(t, r.Body)
	for _, gone := range []string{"op", "banned", "discord", "rank", "uuid"} {
		if names[gone] {
			t.Errorf("anonymous player has %q: %s", gone, r.Body)
		}
	}
	for _, kept := range []string{"name", "playtime", "balance"} {
		if !names[kept] {
			t.Errorf("anonymous player lost %q: %s", kept, r.Body)
		}
	}
	if h := Meta(t, r.Body)["hiddenFields"]; !reflect.DeepEqual(h, []any{"op", "banned", "discord", "rank", "uuid"}) {
		t.Errorf("hiddenFields %v, want [op banned discord rank uuid]", h)
	}
	WantBackendBytes(t, Send(t, "GET", player, WithKey(KeyA)), player)
	be.WantSeen(t, "keyed player", player)

	Gateway{Upstream: be.Addr(), Global: global, Statusgate: []string{"key " + KeyA, "protected_fields player uuid", "publish_fields player rank"}}.Start(t)
	r = Send(t, "GET", player)
	be.WantSeen(t, "anonymous player, rank published", player)
	names = MemberNames(t, r.Body)
	if !names["rank"] || names["op"] || names["uuid"] {
		t.Errorf("publish_fields player rank: anonymous player %s, want rank and neither op nor uuid", r.Body)
	}
}
