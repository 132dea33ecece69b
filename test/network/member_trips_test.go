package network

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// One trip per member per snapshot, whatever the sites' field lists (issue
// 49, item 7; docs/network.md, "One document per snapshot, for everyone").

// TestNetworkOneTripWhateverTheFieldLists: two sites whose networks list
// the same members, with different field lists (one hides the players from
// callers without a key), make one trip per member for both sites and both
// classes of caller; each site's document is filtered by its own lists
// after the trip. Before, each site's field lists named its own member
// trips, and each member was asked once per site.
func TestNetworkOneTripWhateverTheFieldLists(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby", "creative")
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	lines := []string{"key " + KeyA, "require_key network off", "cache status 1h", "max_per_client off"}
	g := NetworkGateway(ms, nil, lines...)
	other := append([]string{"enable network", NetworkBlock(ms, nil, ms[0].ID), "protected_fields network players"}, lines...)
	g.Sites = append(g.Sites, fmt.Sprintf(":%d {\n\t%s\n}", port, StatusgateLines(ms[0].Addr(), other, nil, false)))
	g.Start(t)
	for _, m := range ms {
		m.Status(t) // provisioned, counters reset
	}

	otherAddr := fmt.Sprintf("127.0.0.1:%d", port)
	for _, tc := range []struct {
		name    string
		addr    string // "": the first site
		key     bool
		players bool
	}{
		{"the first site, no key", "", false, true},
		{"the first site, a key", "", true, true},
		{"the other site, no key", otherAddr, false, false},
		{"the other site, a key", otherAddr, true, true},
	} {
		var r Response
		switch {
		case tc.addr == "" && tc.key:
			r = Send(t, "GET", "/api/v1/network", WithKey(KeyA))
		case tc.addr == "":
			r = Send(t, "GET", "/api/v1/network")
		default:
			key := ""
			if tc.key {
				key = WithKey(KeyA) + "\r\n"
			}
			r = SendRawTo(t, tc.addr, "GET", "GET /api/v1/network HTTP/1.1\r\nHost: other.example\r\n"+key+"Connection: close\r\n\r\n")
		}
		doc := ReadNetwork(t, r)
		shown := strings.Contains(string(r.Body), `"players":[`)
		hidden := slices.Equal(doc.Meta.HiddenFields, []string{"players"})
		if doc.Data.ServerCount != 3 || shown != tc.players || hidden == tc.players {
			t.Errorf("%s: players shown %v, hidden %v, want shown %v: %s", tc.name, shown, hidden, tc.players, Clip(r.Body))
		}
	}
	for _, m := range ms {
		if n := m.Trips(); n != 1 {
			t.Errorf("%s: %d trips for two sites with different field lists, two classes each, want 1", m.ID, n)
		}
	}
}
