package jsonfilter

import (
	"math/rand/v2"
	"testing"
)

// TestSWAR compares the word-at-a-time scanners with byte loops on every
// byte value at every position of a word, and on random runs.
func TestSWAR(t *testing.T) {
	naivePlain := func(p []byte, i int) int {
		for i < len(p) && p[i] != '"' && p[i] != '\\' && p[i] >= 0x20 {
			i++
		}
		return i
	}
	naiveDigits := func(p []byte, i int) int {
		for i < len(p) && p[i] >= '0' && p[i] <= '9' {
			i++
		}
		return i
	}
	check := func(p []byte) {
		for i := 0; i <= len(p); i++ {
			if got, want := plainEnd(p, i), naivePlain(p, i); got != want {
				t.Fatalf("plainEnd(%q, %d) = %d, want %d", p, i, got, want)
			}
			if got, want := digitsEnd(p, i), naiveDigits(p, i); got != want {
				t.Fatalf("digitsEnd(%q, %d) = %d, want %d", p, i, got, want)
			}
		}
	}
	for c := range 256 {
		for pos := range 17 {
			for _, fill := range []byte{'a', '5', 0x80, 0xff, 0x1f, '"'} {
				p := make([]byte, 17)
				for k := range p {
					p[k] = fill
				}
				p[pos] = byte(c)
				check(p)
			}
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("09/:aZ\"\\\x00\x1f\x20\x21\x7f\x80\xff.-")
	for range 20000 {
		p := make([]byte, rng.IntN(40))
		for k := range p {
			p[k] = alphabet[rng.IntN(len(alphabet))]
		}
		check(p)
	}
}
