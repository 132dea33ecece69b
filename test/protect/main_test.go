// Package protect tests backend protection (docs/backend-protection.md)
// through a real Caddy (test/internal/rig): guards and their limits across
// reloads, sharing and its isolation, stalled readers and streams, held bytes
// and a key's share of them, clients that hang up, concurrent callers.
package protect

import (
	"os"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestMain runs the package's tests with its own Caddy.
func TestMain(m *testing.M) { os.Exit(RunWithCaddy(m)) }
