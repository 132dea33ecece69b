package main

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
