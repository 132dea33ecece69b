package main

import (
	"math"
	"slices"
	"time"
)

// median of xs (the mean of the two middle values for an even count); 0 for none.
func median(xs []float64) float64 {
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

// percentile p (0 < p <= 100) of sorted ds by the nearest-rank method: the
// smallest value that at least p% of the samples do not exceed; 0 for none.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(len(sorted))/100 - 1e-9))
	rank = max(1, min(rank, len(sorted)))
	return sorted[rank-1]
}

// pairRatios divides b[i] by a[i] for every pair; pairs where a[i] is 0 are skipped.
func pairRatios(a, b []float64) []float64 {
	var r []float64
	for i := range min(len(a), len(b)) {
		if a[i] > 0 {
			r = append(r, b[i]/a[i])
		}
	}
	return r
}
