package network

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// Members are other servers (issue 49, item 6; docs/network.md, "Members
// are fixed servers").

// TestNetworkOwnListenerByAnotherName: a member whose address reaches the
// gateway's own listener by another name than the listener's is refused
// at load, naming the member and how it reaches the listener: another
// loopback address on a server that listens on every address, its
// IPv4-mapped form, the site's Unix socket by a path through a link, the
// machine's host name. Before, each loaded, and self's players counted
// twice. Another loopback address than the one a server listens on is
// another server, and loads.
func TestNetworkOwnListenerByAnotherName(t *testing.T) {
	ms := NewSimMembers(t, "survival", "lobby")
	dir, err := os.MkdirTemp("", "sg-own") // short: a socket's path is at most 108 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Symlink(dir, dir+"-link"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(dir + "-link") })
	port := fmt.Sprint(HTTPPort)
	every := "bind 0.0.0.0"
	cases := []struct {
		name, lobby, bind, dial, how string
	}{
		{"another loopback address", "127.0.0.2:" + port, every, "tcp/127.0.0.2:" + port, "(127.0.0.2, an address of this machine"},
		{"an IPv4-mapped loopback address", "[::ffff:127.0.0.2]:" + port, every, "tcp/127.0.0.2:" + port, "(127.0.0.2, an address of this machine"},
		{"the site's Unix socket", "unix/" + dir + "-link/gw.sock", "bind unix/" + dir + "/gw.sock", "unix/" + dir + "-link/gw.sock", "(the same Unix socket)"},
	}
	if host, err := os.Hostname(); err == nil && resolvesHere(host) {
		cases = append(cases, struct{ name, lobby, bind, dial, how string }{
			"the machine's host name", host + ":" + port, every, "tcp/" + strings.ToLower(host) + ":" + port, strings.ToLower(host) + " resolves to "})
	} else {
		t.Logf("the host name %q does not resolve to an address of this machine: not tried", host)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NetworkGateway(ms, map[string]string{"lobby": tc.lobby}, "key "+KeyA)
			g.Site = []string{tc.bind}
			msg := LoadRefused(t, g.Caddyfile())
			for _, w := range []string{"network.servers[1] 'lobby'.proxy: " + tc.lobby + ": " + tc.dial + " is this gateway's own listener", tc.how, "players count twice"} {
				if !strings.Contains(msg, w) {
					t.Errorf("refusal %q does not say %q", msg, w)
				}
			}
		})
	}
	t.Run("another server's loopback address", func(t *testing.T) {
		// The gateway listens on 127.0.0.1 alone: 127.0.0.2 on its port is
		// some other server.
		g := NetworkGateway(ms, map[string]string{"lobby": "127.0.0.2:" + port}, "key "+KeyA)
		if code, msg := PostCaddyfile(t, g.Caddyfile()); code != http.StatusOK {
			t.Errorf("refused (%d): %s", code, msg)
		}
	})
}

// resolvesHere reports whether host resolves to a loopback address or one
// of this machine's interfaces.
func resolvesHere(host string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return false
	}
	addrs, _ := net.InterfaceAddrs()
	for _, ip := range ips {
		ip = ip.Unmap()
		if ip.IsLoopback() {
			return true
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil && p.Addr().Unmap() == ip {
				return true
			}
		}
	}
	return false
}
