package guard

import (
	"encoding/json"
	"testing"

	"github.com/statusgate/statusgate/caddymodule/internal/upstream"
)

// TestHeir: a new name in front of a server a guard of an earlier load
// fronts takes that guard over (a respelled upstream, a guard <name>
// added); a second new name in the same load, another server, or a handler
// that declares none, starts a guard of its own; and the guard outlives the
// name it was made under.
func TestHeir(t *testing.T) {
	backend := func(dial string) *upstream.Backend {
		t.Helper()
		b, err := upstream.Parse("proxy", json.RawMessage(`{"upstreams":[{"dial":"`+dial+`"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	join := func(name string, load uint64, b *upstream.Backend) *Guard {
		t.Helper()
		g, err := Join(Config{Name: Name(name, b), Load: load, Limits: Limits{InFlight: 2, MaxHeld: 64 << 20, Instances: 1}, Backend: b})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(g.Leave)
		return g
	}
	first := join("", 901, backend("127.0.0.1:47001"))
	respelled := join("", 902, backend("localhost:47001"))
	if respelled.guardState != first.guardState {
		t.Error("the upstream respelled as localhost in the next load: another guard")
	}
	if other := join("other", 902, backend("127.0.0.1:47001")); other.guardState == first.guardState {
		t.Error("a second name in the load that took the guard over shares it")
	}
	if far := join("", 902, backend("127.0.0.1:47002")); far.guardState == first.guardState {
		t.Error("another server took the guard over")
	}
	first.Leave() // the old config ends
	named := join("survival", 903, backend("127.0.0.1:47001"))
	if named.guardState != respelled.guardState {
		t.Error("guard <name> added in the next load: another guard")
	}
	if legacy := join("survival2", 904, nil); legacy.guardState == named.guardState {
		t.Error("a handler that declares no server took a guard over")
	}
}
