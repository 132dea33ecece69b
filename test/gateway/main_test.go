// Package gateway tests the request path through a real Caddy (test/internal/rig):
// every endpoint anonymous and keyed, every option, path spellings over raw
// TCP, the field layer end to end, the fail-closed cases, keys out of logs and
// configs, key scopes, side doors, the declared backend and the sealed request,
// the placeholders and the metrics.
package gateway

import (
	"os"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestMain runs the package's tests with its own Caddy.
func TestMain(m *testing.M) { os.Exit(RunWithCaddy(m)) }
