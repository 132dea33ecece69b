package rig

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/statusgate/statusgate/internal/fixture"
)

// These tests attack the gateway with clients that read slowly or not at all,
// as well-behaved clients never do: whatever such a client holds must be its
// own, never the backend's slots or another caller's wait.

// StalledClient sends a request for target on a connection with a 2 KiB
// receive buffer and never reads the answer; the connection stays open until
// the test ends.
func StalledClient(t *testing.T, target string, headers ...string) {
	t.Helper()
	StalledConn(t, target, headers...)
}

// StalledConn is stalledClient's connection, for a test to read later.
func StalledConn(t *testing.T, target string, headers ...string) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 5 * time.Second, Control: fixture.SmallRcvBuf}
	conn, err := d.Dial("tcp", GatewayAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var req strings.Builder
	fmt.Fprintf(&req, "GET %s HTTP/1.1\r\nHost: %s\r\n", target, GatewayAddr)
	for _, h := range headers {
		req.WriteString(h + "\r\n")
	}
	req.WriteString("\r\n")
	if _, err := conn.Write([]byte(req.String())); err != nil {
		t.Fatal(err)
	}
	return conn
}

// WaitSeen waits until the backend has seen n requests, and takes them. It
// gives up when none has come for Patience: n requests take as long as the
// machine needs for them (64 of 256 KiB answers on a busy one), and only one
// that never comes uses Patience up.
func WaitSeen(t *testing.T, be *Backend, n int) {
	t.Helper()
	deadline := time.Now().Add(Patience)
	got := 0
	for time.Now().Before(deadline) {
		if seen := len(be.Take()); seen > 0 {
			got += seen
			deadline = time.Now().Add(Patience)
		}
		if got >= n {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("the backend saw %d requests, want %d; none came in the last %v", got, n, Patience)
}
