package jsonfilter

import (
	"bytes"
	"unicode/utf8"

	"github.com/statusgate/statusgate/internal/apijson"
)

// linearLimit is the number of matchable names up to which a lookup compares
// them one by one; past it a map is cheaper.
const linearLimit = 16

// Names is an immutable, compiled set of member names to remove, in
// configuration order (duplicates in the input collapse to the first). It is
// built once at configuration time and is safe for concurrent use.
//
// Besides the list it holds cheap prefilters (first bytes, lengths, longest
// name) so that the scanner can decide "keep" for almost every key of a large
// document without comparing strings.
type Names struct {
	list   []string // configuration order, deduplicated
	quoted [][]byte // each name as a JSON string, for meta.hiddenFields

	// Matchable names only: a name that is not valid UTF-8 can never equal
	// a key, because encoding/json turns invalid bytes in keys into U+FFFD.
	match []nameIndex
	index map[string]int // only when len(match) > linearLimit

	maxLen int       // longest matchable name in bytes; -1 when there is none
	first  [256]bool // first bytes of the matchable names
	lens   uint64    // bit k: a matchable name has length k (k < 63); bit 63: some name is longer
	empty  bool      // "" is a matchable name

	// fffd is set when a name contains U+FFFD: then a key with invalid
	// UTF-8 may match after encoding/json-style replacement, so raw
	// comparisons and the first-byte/length prefilters are not enough.
	fffd bool
}

type nameIndex struct {
	name string
	idx  int
}

// NewNames compiles names. Duplicates collapse to their first occurrence.
func NewNames(names []string) *Names {
	n := &Names{maxLen: -1}
	seen := make(map[string]bool, len(names))
	for _, s := range names {
		if seen[s] {
			continue
		}
		seen[s] = true
		idx := len(n.list)
		n.list = append(n.list, s)
		n.quoted = append(n.quoted, apijson.AppendString(nil, s))
		if !utf8.ValidString(s) {
			continue
		}
		n.match = append(n.match, nameIndex{s, idx})
		n.maxLen = max(n.maxLen, len(s))
		if s == "" {
			n.empty = true
			continue
		}
		n.first[s[0]] = true
		n.lens |= 1 << min(len(s), 63)
		if bytes.Contains([]byte(s), []byte("\uFFFD")) {
			n.fffd = true
		}
	}
	if n.fffd {
		// Any non-ASCII byte may become U+FFFD, and replacement changes
		// lengths: leave only the maxLen bound, which replacement cannot
		// defeat (it never shortens a key).
		for b := 0x80; b < 0x100; b++ {
			n.first[b] = true
		}
		n.lens = ^uint64(0)
	}
	if len(n.match) > linearLimit {
		n.index = make(map[string]int, len(n.match))
		for _, m := range n.match {
			n.index[m.name] = m.idx
		}
	}
	return n
}

// Len reports the number of distinct names.
func (n *Names) Len() int { return len(n.list) }

// maybe is the prefilter for a raw key without escapes: false means the key
// certainly matches no name.
func (n *Names) maybe(key []byte) bool {
	l := len(key)
	if l > n.maxLen {
		return false
	}
	if l == 0 {
		return n.empty
	}
	return n.first[key[0]] && n.lens&(1<<min(l, 63)) != 0
}

// lookup returns the configuration index of the name equal to the decoded
// key, or -1.
func (n *Names) lookup(key []byte) int {
	if n.index != nil {
		if j, ok := n.index[string(key)]; ok {
			return j
		}
		return -1
	}
	for _, m := range n.match {
		if m.name == string(key) {
			return m.idx
		}
	}
	return -1
}

var emptyNames = NewNames(nil)
