// Package live tests live status (docs/live.md) through a real Caddy
// (test/internal/rig): streams of the plain answers, their seats, topics and
// held bytes, one backend trip per snapshot for every viewer.
package live

import (
	"os"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestMain runs the package's tests with its own Caddy.
func TestMain(m *testing.M) { os.Exit(RunWithCaddy(m)) }
