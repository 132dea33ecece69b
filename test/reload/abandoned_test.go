package reload

import (
	"fmt"
	"net"
	"testing"

	"github.com/statusgate/statusgate/internal/fixture"
	"github.com/statusgate/statusgate/test/internal/harness"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestStopEndsAbandonedTrips: SIGTERM to a caddy process whose backend
// still works on a request whose client hung up stops it at once, with a
// long timeout and with none: nobody waits for that answer. Before, the
// stop waited for the trip: until the budget's end (4.3 s with the default
// 5 s), or with `timeout off` until the backend answered.
func TestStopEndsAbandonedTrips(t *testing.T) {
	for _, timeout := range []string{"off", "1h"} {
		t.Run("timeout "+timeout, func(t *testing.T) {
			be := NewGatedBackend(t) // answers nothing until the test ends
			gw := startStatusgate(t, be.Addr(), "timeout "+timeout)
			conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", gw.Port))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", PlayerN(1))
			be.Await(t, 1)
			conn.Close()
			if killed := gw.StopWithin(fixture.Patience); killed {
				t.Fatalf("caddy was still running %v after SIGTERM with a request at the backend whose client had hung up; its log:\n%s",
					fixture.Patience, harness.Tail(gw.LogPath, 20))
			}
			if n := be.InFlight.Load(); n != 1 {
				t.Errorf("the backend has %d requests, want the abandoned one still", n)
			}
		})
	}
}
