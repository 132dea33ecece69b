// Package filegraph draws one Go package as a graph of its files: an arrow
// from the file that uses a package-level name (a type, function, variable
// or constant) to the file that declares it, as the type checker resolves
// each use. A cycle in that graph is a set of files that cannot be read in
// any order without reading ahead, which is what a house whose imports run
// one way does not have (docs/development.md). Methods and fields are not
// package-level names: a method call draws the arrow of its receiver's type
// where that type is named, not of the method.
//
// The package is type-checked from source against its dependencies'
// export data, which `go list -export` builds, so a call costs about what
// `go vet` of the package does.
package filegraph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Graph is a package's files and the arrows between them, by base name.
type Graph struct {
	Files []string
	// Uses[a][b] lists the names a uses that b declares (a != b).
	Uses map[string]map[string][]string
}

// Load type-checks the package in dir (its non-test files, for the
// current GOOS and GOARCH) and returns its file graph.
func Load(dir string) (*Graph, error) {
	files, exports, err := list(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, f := range files {
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		parsed = append(parsed, af)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		file, ok := exports[path]
		if !ok || file == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(file)
	}
	conf := types.Config{Importer: importer.ForCompiler(fset, "gc", lookup)}
	info := &types.Info{Uses: map[*ast.Ident]types.Object{}}
	pkg, err := conf.Check(parsed[0].Name.Name, fset, parsed, info)
	if err != nil {
		return nil, err
	}
	g := &Graph{Uses: map[string]map[string][]string{}}
	for _, f := range files {
		g.Files = append(g.Files, filepath.Base(f))
	}
	for id, obj := range info.Uses {
		if obj.Pkg() != pkg || obj.Parent() != pkg.Scope() {
			continue // another package's, a local, a field or a method
		}
		from := filepath.Base(fset.Position(id.Pos()).Filename)
		to := filepath.Base(fset.Position(obj.Pos()).Filename)
		if from == to {
			continue
		}
		if g.Uses[from] == nil {
			g.Uses[from] = map[string][]string{}
		}
		if !slices.Contains(g.Uses[from][to], obj.Name()) {
			g.Uses[from][to] = append(g.Uses[from][to], obj.Name())
		}
	}
	for _, m := range g.Uses {
		for _, names := range m {
			slices.Sort(names)
		}
	}
	return g, nil
}

// list asks the go command for the package's files and its dependencies'
// export data.
func list(dir string) (files []string, exports map[string]string, err error) {
	cmd := exec.Command("go", "list", "-export", "-deps", "-json=ImportPath,Export,Dir,GoFiles,CgoFiles,DepOnly", ".")
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("go list in %s: %v: %s", dir, err, stderr.String())
	}
	exports = map[string]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath, Export, Dir string
			GoFiles, CgoFiles       []string
			DepOnly                 bool
		}
		if err := dec.Decode(&p); err != nil {
			return nil, nil, err
		}
		exports[p.ImportPath] = p.Export
		if !p.DepOnly {
			if len(p.CgoFiles) > 0 {
				return nil, nil, fmt.Errorf("%s uses cgo, which this graph does not read", p.ImportPath)
			}
			for _, f := range p.GoFiles {
				files = append(files, filepath.Join(p.Dir, f))
			}
		}
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no Go files in %s", dir)
	}
	return files, exports, nil
}

// Cycles returns the graph's strongly connected components of more than one
// file, each sorted, largest first: every file of one can reach every other.
func (g *Graph) Cycles() [][]string {
	index, low := map[string]int{}, map[string]int{}
	onStack := map[string]bool{}
	var stack []string
	var out [][]string
	next := 0
	var visit func(v string)
	visit = func(v string) {
		index[v], low[v] = next, next
		next++
		stack = append(stack, v)
		onStack[v] = true
		for _, w := range sortedKeys(g.Uses[v]) {
			if _, seen := index[w]; !seen {
				visit(w)
				low[v] = min(low[v], low[w])
			} else if onStack[w] {
				low[v] = min(low[v], index[w])
			}
		}
		if low[v] == index[v] {
			var comp []string
			for {
				w := stack[len(stack)-1]
				stack = stack[:len(stack)-1]
				onStack[w] = false
				comp = append(comp, w)
				if w == v {
					break
				}
			}
			if len(comp) > 1 {
				slices.Sort(comp)
				out = append(out, comp)
			}
		}
	}
	for _, f := range g.Files {
		if _, seen := index[f]; !seen {
			visit(f)
		}
	}
	slices.SortStableFunc(out, func(a, b []string) int { return len(b) - len(a) })
	return out
}

// Describe writes each cycle with the arrows inside it and the names that
// make each arrow, for the reader who has to break it.
func (g *Graph) Describe(cycles [][]string) string {
	var b strings.Builder
	for i, c := range cycles {
		fmt.Fprintf(&b, "cycle %d: %s\n", i+1, strings.Join(c, " "))
		for _, from := range c {
			for _, to := range c {
				if names := g.Uses[from][to]; len(names) > 0 {
					fmt.Fprintf(&b, "  %s -> %s: %s\n", from, to, strings.Join(names, ", "))
				}
			}
		}
	}
	return b.String()
}

func sortedKeys(m map[string][]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
