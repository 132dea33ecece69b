package sim

import (
	"math"
	"strconv"
	"strings"

	"github.com/statusgate/statusgate/internal/apijson"
)

// The plugin writes its JSON by hand (J/json/Json.java) and the sim does the
// same rather than use encoding/json, for three reasons a gateway can see:
// member order is fixed by the code, not sorted; doubles are written like
// Java's BigDecimal.toPlainString (20.0 stays 20.0); and only a few
// characters are escaped (no \u003c for '<', non-ASCII written raw).

// obj is a JSON object whose members are written in the order given.
type obj []member

type member struct {
	k string
	v any
}

// raw is spliced into the output verbatim, like the plugin's Json.raw
// fragments (status history, network heartbeats).
type raw []byte

// appendJSON writes v. Supported: nil, bool, string, int, int64, float64
// (as a Java double), obj, raw, []any, []string, []int, []int64 and
// []*int64 (nil elements become null).
func appendJSON(b []byte, v any) []byte {
	switch v := v.(type) {
	case nil:
		return append(b, "null"...)
	case bool:
		return strconv.AppendBool(b, v)
	case string:
		return apijson.AppendString(b, v)
	case int:
		return strconv.AppendInt(b, int64(v), 10)
	case int64:
		return strconv.AppendInt(b, v, 10)
	case float64:
		return appendJavaDouble(b, v)
	case raw:
		return append(b, v...)
	case obj:
		b = append(b, '{')
		for i, m := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = apijson.AppendString(b, m.k)
			b = append(b, ':')
			b = appendJSON(b, m.v)
		}
		return append(b, '}')
	case []any:
		return appendArray(b, v)
	case []string:
		return appendArray(b, v)
	case []int:
		return appendArray(b, v)
	case []int64:
		return appendArray(b, v)
	case []*int64:
		b = append(b, '[')
		for i, p := range v {
			if i > 0 {
				b = append(b, ',')
			}
			if p == nil {
				b = append(b, "null"...)
			} else {
				b = strconv.AppendInt(b, *p, 10)
			}
		}
		return append(b, ']')
	}
	// A programming error in the sim, not a request error: fail loudly in
	// tests rather than emit a silently wrong document.
	panic("sim: appendJSON: unsupported type")
}

func appendArray[T any](b []byte, vs []T) []byte {
	b = append(b, '[')
	for i, v := range vs {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendJSON(b, v)
	}
	return append(b, ']')
}

// appendJavaDouble writes d as BigDecimal.valueOf(d).toPlainString() does:
// 20.0, 19.97, 1500.0, 130000000 for 1.3E8, 0.00010 for 1.0E-4; NaN and the
// infinities as null. BigDecimal.valueOf goes through Double.toString, which
// (since JDK 19) prints the shortest digits that round-trip, as Go's 'e'
// format with precision -1 does.
func appendJavaDouble(b []byte, d float64) []byte {
	if math.IsNaN(d) || math.IsInf(d, 0) {
		return append(b, "null"...)
	}
	if d == 0 {
		return append(b, "0.0"...) // BigDecimal has no negative zero
	}
	if d < 0 {
		b = append(b, '-')
		d = -d
	}
	// e is "d.ddde±XX"; digits are the significant digits, exp the power of
	// ten of the first one.
	e := strconv.FormatFloat(d, 'e', -1, 64)
	mant, expStr, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := mant[:1]
	if len(mant) > 2 {
		digits += mant[2:]
	}
	if d >= 1e-3 && d < 1e7 {
		// Double.toString's plain form: at least one fraction digit.
		intLen := exp + 1
		if intLen <= 0 {
			b = append(b, "0."...)
			for range -intLen {
				b = append(b, '0')
			}
			return append(b, digits...)
		}
		for len(digits) <= intLen {
			digits += "0"
		}
		b = append(b, digits[:intLen]...)
		b = append(b, '.')
		return append(b, digits[intLen:]...)
	}
	// Computerised notation "D.DDDE±n" with at least one fraction digit,
	// then BigDecimal's plain string of it: unscaled digits, scale =
	// fraction digits - n.
	if len(digits) == 1 {
		digits += "0"
	}
	scale := len(digits) - 1 - exp
	if scale <= 0 {
		b = append(b, digits...)
		for range -scale {
			b = append(b, '0')
		}
		return b
	}
	if len(digits) > scale {
		b = append(b, digits[:len(digits)-scale]...)
		b = append(b, '.')
		return append(b, digits[len(digits)-scale:]...)
	}
	b = append(b, "0."...)
	for range scale - len(digits) {
		b = append(b, '0')
	}
	return append(b, digits...)
}
