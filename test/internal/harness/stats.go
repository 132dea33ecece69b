package harness

import (
	"math"
	"slices"
	"time"
)

// Median of xs (the mean of the two middle values for an even count); 0 for none.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	m := len(s) / 2
	if len(s)%2 == 1 {
		return s[m]
	}
	return (s[m-1] + s[m]) / 2
}

// Percentile p (0 < p <= 100) of sorted ds by the nearest-rank method: the
// smallest value that at least p% of the samples do not exceed; 0 for none.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(sorted))/100 - 1e-9))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}
