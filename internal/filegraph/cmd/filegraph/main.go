// Command filegraph prints the cycles of a Go package's file graph (package
// filegraph): the files that use each other's package-level names, with the
// names. It exits 1 when there is a cycle.
//
//	go run ./internal/filegraph/cmd/filegraph ./caddymodule
package main

import (
	"fmt"
	"os"

	"github.com/statusgate/statusgate/internal/filegraph"
)

func main() {
	dirs := os.Args[1:]
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	status := 0
	for _, dir := range dirs {
		g, err := filegraph.Load(dir)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		cycles := g.Cycles()
		if len(cycles) == 0 {
			fmt.Printf("%s: %d files, no cycle\n", dir, len(g.Files))
			continue
		}
		status = 1
		fmt.Printf("%s: %d files, %d cycles\n%s", dir, len(g.Files), len(cycles), g.Describe(cycles))
	}
	os.Exit(status)
}
