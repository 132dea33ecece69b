package pkg

// A uses B, and B uses A: a cycle.
type A struct{ b *B }

func newA() A { return A{b: &B{}} }
