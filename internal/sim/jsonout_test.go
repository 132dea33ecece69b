package sim

import (
	"math"
	"testing"
)

// The expected strings are what BigDecimal.valueOf(d).toPlainString()
// prints on JDK 25.
func TestAppendJavaDouble(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{20, "20.0"},
		{19.97, "19.97"},
		{1500, "1500.0"},
		{0, "0.0"},
		{math.Copysign(0, -1), "0.0"},
		{0.2, "0.2"},
		{0.001, "0.001"},
		{0.00099, "0.00099"},
		{1e-4, "0.00010"},
		{1.5e-5, "0.000015"},
		{1.3e8, "130000000"},
		{1e7, "10000000"},
		{9999999.5, "9999999.5"},
		{12345678.9, "12345678.9"},
		{1.23456789e10, "12345678900"},
		{-2.5, "-2.5"},
		{-1e7, "-10000000"},
		{1520.75, "1520.75"},
		{math.NaN(), "null"},
		{math.Inf(1), "null"},
		{math.Inf(-1), "null"},
	} {
		if got := string(appendJavaDouble(nil, tc.in)); got != tc.want {
			t.Errorf("%v: got %s, want %s", tc.in, got, tc.want)
		}
	}
}

func TestAppendJSON(t *testing.T) {
	n := int64(5)
	v := obj{
		{"z", 1}, {"a", nil}, {"m", []any{true, "x", 2.0}}, {"r", raw(`{"k":[1]}`)},
		{"s", []string{}}, {"i", []int{1, 2}}, {"p", []*int64{&n, nil}}, {"l", int64(-4172144997902289642)},
	}
	want := `{"z":1,"a":null,"m":[true,"x",2.0],"r":{"k":[1]},"s":[],"i":[1,2],"p":[5,null],"l":-4172144997902289642}`
	if got := string(appendJSON(nil, v)); got != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
