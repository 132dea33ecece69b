package filegraph

import (
	"slices"
	"testing"
)

func TestCycles(t *testing.T) {
	g, err := Load("testdata/pkg")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"a.go", "b.go", "c.go"}; !slices.Equal(g.Files, want) {
		t.Fatalf("files %v, want %v", g.Files, want)
	}
	cycles := g.Cycles()
	if len(cycles) != 1 || !slices.Equal(cycles[0], []string{"a.go", "b.go"}) {
		t.Fatalf("cycles %v, want [[a.go b.go]]\n%s", cycles, g.Describe(cycles))
	}
	if names := g.Uses["c.go"]["b.go"]; names != nil {
		t.Errorf("c.go -> b.go drawn for %v: a method call is not a use of b.go's names", names)
	}
	if names := g.Uses["c.go"]["a.go"]; !slices.Equal(names, []string{"newA"}) {
		t.Errorf("c.go -> a.go: %v, want [newA]", names)
	}
	want := "cycle 1: a.go b.go\n  a.go -> b.go: B\n  b.go -> a.go: A, newA\n"
	if got := g.Describe(cycles); got != want {
		t.Errorf("Describe:\n%s\nwant:\n%s", got, want)
	}
}
