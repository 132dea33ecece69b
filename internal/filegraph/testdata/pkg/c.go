package pkg

import "strings"

// C uses A and a method of B (which draws no arrow to b.go): no cycle.
func C() string { a := newA(); _ = a.b.make(); return strings.ToUpper("c") }
