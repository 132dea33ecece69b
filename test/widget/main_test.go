// Package widget tests the status widget (examples/widget) in headless
// Chromium against a real Caddy (test/internal/rig).
package widget

import (
	"os"
	"testing"

	. "github.com/statusgate/statusgate/test/internal/rig"
)

// TestMain runs the package's tests with its own Caddy, and stops the
// browser after them.
func TestMain(m *testing.M) {
	os.Exit(RunWithCaddy(m, func() {
		if browser.stop != nil {
			browser.stop()
		}
	}))
}
