package guard

import "testing"

// TestSentHostAllocatesNothing: the Host of most requests, a name without a
// port in lower case, is read without an allocation (SplitHostPort's error
// for a host without a port cost every request one).
func TestSentHostAllocatesNothing(t *testing.T) {
	for _, host := range []string{"example.com", "survival.test"} {
		if n := testing.AllocsPerRun(100, func() { _ = SentHost(host) }); n != 0 {
			t.Errorf("SentHost(%q): %v allocations, want none", host, n)
		}
	}
}
