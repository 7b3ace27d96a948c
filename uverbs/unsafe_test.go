package uverbs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// sanctionedAddrs are the only functions of the module that may turn a
// pointer into an integer outside a system call's argument list, each for
// memory that cannot move or be freed while the kernel holds the address.
var sanctionedAddrs = map[string]string{
	"uverbs.mappedAddr":         "mmap'ed memory, outside the Go heap",
	"uverbs.(*ioctlBuf).ptrOut": "pinned by the ioctlBuf's runtime.Pinner until the command returns",
	"rxe.pinnedAddr":            "pinned by the caller's runtime.Pinner until the command returns",
	"rxesim.Addr":               "the simulator's addresses: no kernel ever sees them",
	"ring.New":                  "an alignment check, not stored",
}

// Every conversion of a pointer to an integer (uintptr(unsafe.Pointer(x)),
// or uintptr(p) of an unsafe.Pointer p) in the module's code is either an
// argument of a unix.Syscall-family call, the one form the compiler keeps
// the pointee alive and in place for, or inside a sanctioned helper. An
// address stored into a command struct anywhere else may name freed or
// moved memory by the time the kernel writes to it (a goroutine stack that
// grew and moved, an object collected meanwhile).
func TestUnsafeAddressesSanctioned(t *testing.T) {
	root := ".."
	fset := token.NewFileSet()
	used := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "integration" || strings.HasPrefix(d.Name(), ".")) && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			name := f.Name.Name + "." + funcName(fn)
			for _, pos := range pointerToInt(fn) {
				if _, ok := sanctionedAddrs[name]; ok {
					used[name] = true
					continue
				}
				t.Errorf("%s: %s converts a pointer to an integer outside a system call's arguments; pin the memory and use a sanctioned helper (or a pointer-typed field such as ptr64)", fset.Position(pos), name)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for name := range sanctionedAddrs {
		if !used[name] {
			t.Errorf("sanctioned helper %s converts no pointer: drop it from the list", name)
		}
	}
}

// funcName is "f" or "(*T).f"/"T.f" for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	switch t := fn.Recv.List[0].Type.(type) {
	case *ast.StarExpr:
		return "(*" + typeName(t.X) + ")." + fn.Name.Name
	default:
		return typeName(t) + "." + fn.Name.Name
	}
}

func typeName(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.IndexExpr:
		return typeName(t.X)
	case *ast.IndexListExpr:
		return typeName(t.X)
	}
	return "?"
}

// pointerToInt returns where fn converts a pointer to uintptr other than
// directly in the argument list of a unix.Syscall-family call.
func pointerToInt(fn *ast.FuncDecl) []token.Pos {
	ptrVars := map[*ast.Object]bool{}
	markPtr := func(names []*ast.Ident, typ ast.Expr) {
		if isUnsafeSel(typ, "Pointer") {
			for _, n := range names {
				if n.Obj != nil {
					ptrVars[n.Obj] = true
				}
			}
		}
	}
	for _, fl := range []*ast.FieldList{fn.Recv, fn.Type.Params} {
		if fl != nil {
			for _, f := range fl.List {
				markPtr(f.Names, f.Type)
			}
		}
	}
	allowed := map[ast.Expr]bool{}
	var found []token.Pos
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.ValueSpec:
			markPtr(n.Names, n.Type)
		case *ast.AssignStmt:
			if n.Tok == token.DEFINE && len(n.Lhs) == len(n.Rhs) {
				for i, r := range n.Rhs {
					if id, ok := n.Lhs[i].(*ast.Ident); ok && id.Obj != nil && isPointer(r, ptrVars) {
						ptrVars[id.Obj] = true
					}
				}
			}
		case *ast.CallExpr:
			if isSyscall(n.Fun) {
				for _, a := range n.Args {
					allowed[a] = true
				}
			}
			if id, ok := n.Fun.(*ast.Ident); ok && id.Name == "uintptr" && len(n.Args) == 1 && !allowed[n] {
				if isPointer(n.Args[0], ptrVars) {
					found = append(found, n.Pos())
				}
			}
		}
		return true
	})
	return found
}

func isPointer(e ast.Expr, ptrVars map[*ast.Object]bool) bool {
	switch x := e.(type) {
	case *ast.ParenExpr:
		return isPointer(x.X, ptrVars)
	case *ast.Ident:
		return x.Obj != nil && ptrVars[x.Obj]
	case *ast.CallExpr:
		return isUnsafeSel(x.Fun, "Pointer") || isUnsafeSel(x.Fun, "Add") || isUnsafeSel(x.Fun, "SliceData") || isUnsafeSel(x.Fun, "StringData")
	}
	return false
}

func isUnsafeSel(e ast.Expr, name string) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok || s.Sel.Name != name {
		return false
	}
	pkg, ok := s.X.(*ast.Ident)
	return ok && pkg.Name == "unsafe"
}

func isSyscall(e ast.Expr) bool {
	s, ok := e.(*ast.SelectorExpr)
	if !ok {
		return false
	}
	pkg, ok := s.X.(*ast.Ident)
	if !ok || (pkg.Name != "unix" && pkg.Name != "syscall") {
		return false
	}
	switch s.Sel.Name {
	case "Syscall", "Syscall6", "RawSyscall", "RawSyscall6":
		return true
	}
	return false
}
