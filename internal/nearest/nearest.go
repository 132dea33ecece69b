// Package nearest finds, for a word that is none of a known set (a misspelt
// option, subdirective or endpoint name in a config), the known word it is
// most likely a misspelling of, so that the error can say "did you mean".
package nearest

import "strings"

// Word returns the candidate nearest to w, if one is near enough to be a
// misspelling of it: at most a third of w's length in edits (at least one),
// where an edit inserts, deletes or replaces a character or swaps two
// neighbours, and case does not count. Of several at the same distance, the
// first in candidates wins. A candidate equal to w is not a suggestion.
func Word(w string, candidates []string) (string, bool) {
	best, bestDist := "", max(1, len(w)/3)+1
	lw := strings.ToLower(w)
	for _, c := range candidates {
		if c == w {
			continue
		}
		if d := distance(lw, strings.ToLower(c)); d < bestDist {
			best, bestDist = c, d
		}
	}
	return best, best != ""
}

// Suggest is the end of an error message for w: "; did you mean <word>?"
// when Word finds one, "" otherwise.
func Suggest(w string, candidates []string) string {
	if c, ok := Word(w, candidates); ok {
		return "; did you mean " + c + "?"
	}
	return ""
}

// distance is the optimal string alignment distance of a and b, bytes
// compared: insertions, deletions, substitutions and transpositions of
// adjacent bytes, each substring edited once.
func distance(a, b string) int {
	// Three rows of the dynamic programme: i-2, i-1 and i.
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
