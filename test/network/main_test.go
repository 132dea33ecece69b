// Package network tests a network's status (docs/network.md) through a real
// Caddy (test/internal/rig) in front of simulated servers: the plugin's shape,
// one trip per member for every caller, members down, hung, failing or too
// large, and servers written once.
package network

import (
	"os"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestMain runs the package's tests with its own Caddy.
func TestMain(m *testing.M) { os.Exit(RunWithCaddy(m)) }
