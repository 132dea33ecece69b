// Package reload tests how a config ends, with this checkout's caddy as a
// process (harness.Build) and in-process (test/internal/rig): a {file.*} key
// changed and reloaded as the docs say, a reload with shutdown_delay, SIGTERM
// with streams open.
package reload

import (
	"os"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestMain runs the package's tests with its own Caddy.
func TestMain(m *testing.M) { os.Exit(RunWithCaddy(m)) }
