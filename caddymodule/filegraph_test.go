package caddymodule

import (
	"slices"
	"testing"

	"github.com/statusgate/statusgate/internal/filegraph"
)

// TestFileGraph: the package's files use each other's package-level names
// one way (internal/filegraph): no set of files needs each other, and the
// app, which a handler registers with, reaches nothing of the handler's,
// so that what lives per config load reads without the handler. A failure
// prints each cycle with the names that make its arrows (as
// scripts/filegraph.sh does).
func TestFileGraph(t *testing.T) {
	g, err := filegraph.Load(".")
	if err != nil {
		t.Fatal(err)
	}
	if cycles := g.Cycles(); len(cycles) > 0 {
		t.Errorf("the file graph has %d cycles:\n%s", len(cycles), g.Describe(cycles))
	}
	// The files the app reaches: the handler's is none of them.
	reached, queue := map[string]bool{"app.go": true}, []string{"app.go"}
	for len(queue) > 0 {
		from := queue[0]
		queue = queue[1:]
		for to, names := range g.Uses[from] {
			if to == "statusgate.go" {
				t.Errorf("the app reaches the handler: %s uses %v of statusgate.go", from, names)
			}
			if !reached[to] {
				reached[to] = true
				queue = append(queue, to)
			}
		}
	}
	if !slices.Contains(g.Files, "statusgate.go") || !slices.Contains(g.Files, "app.go") {
		t.Errorf("the graph's files are not the package's: %v", g.Files)
	}
}
