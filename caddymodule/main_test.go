package caddymodule

import (
	"fmt"
	"os"
	"testing"

	"github.com/statusgate/statusgate/caddymodule/internal/guard"
)

// TestMain fails the run if a test left a guard in the pool: a guard that
// outlives its test is found again by a later test's handler with the same
// limits, whose results then depend on the order tests run in (and on
// -count), with the first test's cache entries served to the second.
func TestMain(m *testing.M) {
	code := m.Run()
	left := guard.Pooled()
	if len(left) > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "guards left in the pool after the tests (a handler without Cleanup): %q\n", left)
		code = 1
	}
	os.Exit(code)
}
