package guard

import (
	"fmt"
	"os"
	"testing"
)

// TestMain fails the run if a test left a guard in the pool (a Join
// without its Leave): a later test that joins a guard of the same name
// would find it, with the first test's units and cache entries.
func TestMain(m *testing.M) {
	code := m.Run()
	if left := Pooled(); len(left) > 0 && code == 0 {
		fmt.Fprintf(os.Stderr, "guards left in the pool after the tests (a Join without Leave): %q\n", left)
		code = 1
	}
	os.Exit(code)
}
