package abicheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// cStruct finds the mention of a C struct in a doc comment.
var cStruct = regexp.MustCompile(`\bstruct [a-z_][a-z0-9_]*\b`)

// CheckAllPinned fails t for every unexported struct type of the package
// in the current directory (a test's) whose doc comment names a C struct
// ("mmInfo is struct mminfo", "udWR is the ud member of ... struct
// rxe_send_wr") and that no pin has as its Go type: a raw struct added
// without a pin fails here. notRaw names the types whose doc mentions a C
// struct without mirroring one (a frame of pinned parts, a mapping).
func CheckAllPinned(t testing.TB, pins []Pin, notRaw ...string) {
	t.Helper()
	pinned := map[string]bool{}
	for _, n := range notRaw {
		pinned[n] = true
	}
	for _, p := range pins {
		if p.Go != nil {
			pinned[p.Go.Name()] = true
		}
	}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, ".", func(fi fs.FileInfo) bool {
		return !strings.HasSuffix(fi.Name(), "_test.go")
	}, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, pkg := range pkgs {
		for _, f := range pkg.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.TYPE {
					continue
				}
				for _, s := range g.Specs {
					ts := s.(*ast.TypeSpec)
					if _, isStruct := ts.Type.(*ast.StructType); !isStruct || ts.Name.IsExported() || ts.Assign != 0 {
						continue
					}
					doc := ts.Doc
					if doc == nil {
						doc = g.Doc
					}
					if doc == nil || !cStruct.MatchString(doc.Text()) {
						continue
					}
					n++
					if !pinned[ts.Name.Name] {
						t.Errorf("abicheck: %s (%s) mirrors %s but no pin checks it", ts.Name.Name, fset.Position(ts.Pos()), cStruct.FindString(doc.Text()))
					}
				}
			}
		}
	}
	t.Logf("abicheck: %d raw structs documented in this package, all pinned unless reported", n)
}
