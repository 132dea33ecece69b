package caddymodule

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestSyntaxListsEveryOption checks that the syntax of the statusgate block
// is written the same everywhere a user reads it: caddyfileSyntax (which
// errors quote and suggest from) names exactly the options the parser's
// cases read, and UnmarshalCaddyfile's comment, the README's syntax block
// and docs/configuration.md's list every option, with the same arguments,
// in the same order; the key's block likewise.
func TestSyntaxListsEveryOption(t *testing.T) {
	top, key := parserCases(t)
	if got, want := sorted(top), sorted(optionNames(caddyfileSyntax)); !slices.Equal(got, want) {
		t.Errorf("the parser reads %q,\ncaddyfileSyntax has %q", got, want)
	}
	if got, want := sorted(key), sorted(optionNames(keySyntax)); !slices.Equal(got, want) {
		t.Errorf("the key block's parser reads %q,\nkeySyntax has %q", got, want)
	}

	source, err := os.ReadFile("caddyfile.go")
	if err != nil {
		t.Fatal(err)
	}
	godoc := regexp.MustCompile(`(?m)^//\t?`).ReplaceAllString(
		regexp.MustCompile(`(?ms)^//\tstatusgate [^\n]*\{\n.*?^//\t\}\n`).FindString(string(source)), "")
	blocks := map[string]string{"UnmarshalCaddyfile's comment": godoc}
	for _, doc := range []string{"README.md", filepath.Join("docs", "configuration.md")} {
		text, err := os.ReadFile(filepath.Join("..", doc))
		if err != nil {
			t.Fatal(err)
		}
		if m := regexp.MustCompile("(?ms)^```text\n(statusgate [^\n]*\\{\n.*?^\\}\n)```").FindStringSubmatch(string(text)); m != nil {
			blocks[doc] = m[1]
		} else {
			blocks[doc] = ""
		}
	}
	for where, block := range blocks {
		if block == "" {
			t.Errorf("%s: no syntax block", where)
			continue
		}
		gotTop, gotKey := syntaxLines(block)
		if !slices.Equal(gotTop, caddyfileSyntax) {
			t.Errorf("%s lists\n%v,\nthe parser's options are\n%v", where, gotTop, caddyfileSyntax)
		}
		if !slices.Equal(gotKey, keySyntax) {
			t.Errorf("%s lists the key's block as %v, the parser's is %v", where, gotKey, keySyntax)
		}
	}
}

// syntaxLines reads a syntax block: each option's line as its name and its
// arguments (white space between them made one space, an opening brace
// dropped), and the lines of the key's block apart. The lines of another
// option's block are that option's business, and left out.
func syntaxLines(block string) (top, key []option) {
	inBlock := "" // the option whose block the lines are in
	depth := 0    // of blocks within it (a network's server's)
	for _, line := range strings.Split(block, "\n") {
		fields := strings.Fields(line)
		switch {
		case len(fields) == 0 || fields[0] == "statusgate":
			continue
		case fields[0] == "}" || fields[0] == "}]":
			if depth--; depth <= 0 {
				inBlock, depth = "", 0
			}
			continue
		}
		o := option{name: fields[0], args: strings.Join(fields[1:], " ")}
		opens := strings.HasSuffix(o.args, "{")
		switch inBlock {
		case "key":
			key = append(key, o)
		case "":
			o.args = strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(o.args, "{"), "["))
			top = append(top, o)
			if opens {
				inBlock, depth = o.name, 0
			}
		}
		if opens {
			depth++
		}
	}
	return top, key
}

// parserCases are the option names of the case clauses of the switches on
// opt in unmarshalCaddyfile (caddyfile.go) and keyBlock (keys_caddyfile.go).
func parserCases(t *testing.T) (top, key []string) {
	var decls []ast.Decl
	for _, file := range []string{"caddyfile.go", "keys_caddyfile.go"} {
		f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		decls = append(decls, f.Decls...)
	}
	for _, decl := range decls {
		fn, ok := decl.(*ast.FuncDecl)
		if !ok || fn.Name.Name != "unmarshalCaddyfile" && fn.Name.Name != "keyBlock" {
			continue
		}
		ast.Inspect(fn.Body, func(n ast.Node) bool {
			sw, ok := n.(*ast.SwitchStmt)
			if !ok {
				return true
			}
			if id, isIdent := sw.Tag.(*ast.Ident); !isIdent || id.Name != "opt" {
				return true
			}
			for _, stmt := range sw.Body.List {
				for _, e := range stmt.(*ast.CaseClause).List {
					name, err := strconv.Unquote(e.(*ast.BasicLit).Value)
					if err != nil {
						t.Fatal(err)
					}
					if fn.Name.Name == "keyBlock" {
						key = append(key, name)
					} else {
						top = append(top, name)
					}
				}
			}
			return false
		})
	}
	if len(top) == 0 || len(key) == 0 {
		t.Fatal("found no switch on opt in unmarshalCaddyfile or keyBlock")
	}
	return top, key
}

func sorted(s []string) []string {
	return slices.Sorted(slices.Values(s))
}
