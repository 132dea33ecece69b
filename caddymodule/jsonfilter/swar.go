package jsonfilter

import (
	"encoding/binary"
	"math/bits"
)

// Word-at-a-time scanning (SWAR): the hot runs, string bodies and digits,
// are tested eight bytes per step. A byte-per-step loop costs a load, a
// compare and a branch per byte plus a mispredicted exit per token; player
// records are mostly short keys and numbers, so the exit dominates.
const (
	lsb = 0x0101010101010101
	msb = 0x8080808080808080
)

// plainEnd returns the index of the first '"', '\\' or control byte in p at
// or after i, or len(p). In each mask below the lowest flagged byte is exact
// (borrows only create false flags above a true one), so the lowest bit of
// their union is the first special byte.
func plainEnd(p []byte, i int) int {
	for ; i+8 <= len(p); i += 8 {
		w := binary.LittleEndian.Uint64(p[i:])
		// XOR with '"' or '\\' leaves bit 7 alone, so the three masks
		// share their "&^ w" term.
		m := (((w ^ (lsb * '"')) - lsb) | ((w ^ (lsb * '\\')) - lsb) | (w - lsb*0x20)) &^ w & msb
		if m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(p) && !strSpecial[p[i]] {
		i++
	}
	return i
}

// digitsEnd returns the index of the first byte in p at or after i that is
// not an ASCII digit, or len(p).
func digitsEnd(p []byte, i int) int {
	for ; i+8 <= len(p); i += 8 {
		w := binary.LittleEndian.Uint64(p[i:])
		// Nonzero byte where the high nibble is not 3 or the low one exceeds 9.
		m := ((w & (lsb * 0xF0)) ^ (lsb * 0x30)) | (((w & (lsb * 0x0F)) + lsb*0x06) & (lsb * 0xF0))
		// Turn nonzero bytes into their top bit, without carries between bytes.
		if m = (((m & (lsb * 0x7F)) + lsb*0x7F) | m) & msb; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
	}
	for i < len(p) && p[i]-'0' <= 9 {
		i++
	}
	return i
}
