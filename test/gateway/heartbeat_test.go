package gateway

// A gateway's heartbeat (docs/cluster.md, "The heartbeats") runs where it
// can matter: a gateway that is one of several instances, or whose config
// names a storage of its own. A gateway alone with Caddy's default data
// directory writes none, so that two such processes on one machine (the
// demo beside a gateway) never warn about each other.

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/statusgate/statusgate/internal/fixture"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestHeartbeatOnlyWhereShared: with instances 2 the process's heartbeat
// appears in the default storage; a reload to a gateway alone (instances
// 1, no storage of its own) removes it, and nothing writes it again (the
// old load's leaving deletes it only when no load of the process still
// beats); instances 2 again brings it back.
func TestHeartbeatOnlyWhereShared(t *testing.T) {
	be := NewBackend(t)
	dir := filepath.Join(caddy.DefaultStorage.Path, "statusgate", "instances")
	beats := func() int {
		entries, _ := os.ReadDir(dir)
		return len(entries)
	}
	load := func(lines ...string) {
		t.Helper()
		StartDefault(t, be, lines...)
		if r := Send(t, "GET", "/api/v1/server", WithKey(KeyA)); r.Status != 200 {
			t.Fatalf("the gateway: %d", r.Status)
		}
	}
	load("instances 2")
	fixture.WaitFor(t, "the heartbeat of a gateway that is one of two", func() bool { return beats() == 1 })
	load()
	fixture.WaitFor(t, "no heartbeat for a gateway alone with the default storage", func() bool { return beats() == 0 })
	load("instances 2")
	fixture.WaitFor(t, "the heartbeat back", func() bool { return beats() == 1 })
	load()
	fixture.WaitFor(t, "no heartbeat again", func() bool { return beats() == 0 })
}
