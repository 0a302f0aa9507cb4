package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// eagerWork lists what file (Go source) makes every process do as it
// starts: a func init, or a package-level variable set by compiling a
// regular expression. Every deployment pays for it, with whatever
// channels and tools it runs, in start-up time and in memory held from
// then on; a regular expression is compiled on first use instead
// (sync.OnceValue).
func eagerWork(name string, src []byte) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil && d.Name.Name == "init" {
				out = append(out, fset.Position(d.Pos()).String()+": func init runs at every start")
			}
		case *ast.GenDecl:
			if d.Tok != token.VAR {
				continue
			}
			for _, spec := range d.Specs {
				for _, v := range spec.(*ast.ValueSpec).Values {
					if call, ok := v.(*ast.CallExpr); ok && compiles(call.Fun) {
						out = append(out, fset.Position(v.Pos()).String()+": a regular expression compiled at every start; compile it on first use (sync.OnceValue)")
					}
				}
			}
		}
	}
	return out, nil
}

// compiles reports whether fun is regexp's MustCompile or Compile (or
// their POSIX forms).
func compiles(fun ast.Expr) bool {
	sel, ok := fun.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := sel.X.(*ast.Ident)
	return ok && pkg.Name == "regexp" && strings.Contains(sel.Sel.Name, "Compile")
}

// Nothing of the module does work at start that a deployment may not
// need: no func init, no regular expression compiled into a package
// variable. (Other modules' packages do; docs/BENCHMARKS.md names what
// that costs.)
func TestNothingIsDoneAtStart(t *testing.T) {
	var found []string
	files := 0
	err := filepath.WalkDir("../..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "../.." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		eager, err := eagerWork(path, src)
		found = append(found, eager...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d files read: the walk missed the module", files)
	}
	for _, f := range found {
		t.Error(f)
	}
}

// The check finds each kind of work at start, and leaves alone what is
// done on first use.
func TestEagerWorkIsFound(t *testing.T) {
	src := `package p

import (
	"regexp"
	"sync"
)

func init() {}

var a = regexp.MustCompile("a")

var (
	b    = regexp.MustCompile("b")
	c, d = 1, regexp.MustCompilePOSIX("d")
)

var lazy = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile("e") })

func (x T) init() {}

func f() { _ = regexp.MustCompile("f") }
`
	got, err := eagerWork("p.go", []byte(src))
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, g := range got {
		lines = append(lines, strings.SplitN(g, ":", 3)[1])
	}
	if want := []string{"8", "10", "13", "14"}; !slices.Equal(lines, want) {
		t.Errorf("found on lines %q, want %q:\n%s", lines, want, strings.Join(got, "\n"))
	}
}
