package codeshape

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function may be, from its func line to its
// closing brace, tests and test tools included.
const maxFuncLines = 80

// longFunc is a function longer than maxFuncLines.
type longFunc struct {
	name, file  string // file relative to the module root
	line, lines int
}

func (f longFunc) String() string {
	return fmt.Sprintf("%s:%d %s: %d lines", f.file, f.line, f.name, f.lines)
}

func TestFunctionsAreShort(t *testing.T) {
	long, err := longFuncs(moduleRoot(t), maxFuncLines)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range long {
		t.Errorf("%s: longer than %d lines; split it along its steps", f, maxFuncLines)
	}
}

// TestLongFuncsCountsFromFuncToBrace pins how a function is measured, on a
// module of its own: an 81-line function is long, an 80-line one and a
// declaration without a body are not, and dot-directories and testdata are
// not read.
func TestLongFuncsCountsFromFuncToBrace(t *testing.T) {
	root := t.TempDir()
	write := func(rel, src string) {
		path := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	body := func(name string, lines int) string {
		// func line + (lines-2) statements + closing brace
		return "func " + name + "() {\n" + strings.Repeat("\t_ = 0\n", lines-2) + "}\n"
	}
	write("go.mod", "module example\n")
	write("a/a.go", "package a\n\n"+body("Long", 81)+body("Fits", 80)+"func Asm()\n")
	write("a/testdata/t.go", "package t\n\n"+body("InTestdata", 200))
	write(".git/g.go", "package g\n\n"+body("InDotDir", 200))
	write("b/b.go", "package b\n\ntype T struct{}\n\nfunc (T) "+body("Method", 90)[len("func "):])

	long, err := longFuncs(root, 80)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range long {
		got = append(got, f.String())
	}
	want := []string{"a/a.go:3 Long: 81 lines", "b/b.go:5 T.Method: 90 lines"}
	if !slices.Equal(got, want) {
		t.Errorf("long functions = %q, want %q", got, want)
	}
}

// moduleRoot is the nearest directory above the test's own that holds a
// go.mod.
func moduleRoot(t *testing.T) string {
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}

// longFuncs parses every .go file below root, but for dot-directories and
// testdata, and returns the functions with a body longer than max lines, in
// file order.
func longFuncs(root string, max int) ([]longFunc, error) {
	var long []longFunc
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		file, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		for _, decl := range file.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			first, last := fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line
			if lines := last - first + 1; lines > max {
				long = append(long, longFunc{name: funcName(fn), file: rel, line: first, lines: lines})
			}
		}
		return nil
	})
	return long, err
}

// funcName is fn's name, with its receiver's type for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	for {
		switch x := typ.(type) {
		case *ast.StarExpr:
			typ = x.X
			continue
		case *ast.IndexExpr:
			typ = x.X
			continue
		case *ast.IndexListExpr:
			typ = x.X
			continue
		}
		break
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
