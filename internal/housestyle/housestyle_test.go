// Package housestyle checks house rules over the whole repository that no
// compiler checks: functions of a readable size (a long one says why), and
// docs that name only what exists.
package housestyle

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the repository, two levels up from this package.
const root = "../.."

// Function size, outside tests and generated code. A function reads best
// when a name explains each of its parts, not when it is cut to a count:
// up to explainAt lines it needs no word; past it, up to maxLines, it
// names a one-line reason in longFuncs (a type switch over an actor's
// messages, a table of flags read in order); past maxLines it is split
// where a name explains the part. An entry of longFuncs whose function
// is no longer long (or gone) fails too, so the list stays true.
const (
	explainAt = 60
	maxLines  = 80
)

// longFuncs is every function over explainAt lines, keyed by its file
// (from the repository root) and name ("Type.Method" for a method), with
// why it stays whole.
var longFuncs = map[string]string{}

// goFiles parses every Go file of the repository (generated ones too when
// withGenerated) and calls f with each.
func goFiles(t *testing.T, withGenerated bool, f func(path string, fset *token.FileSet, file *ast.File)) {
	t.Helper()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") && path != root || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		fset := token.NewFileSet()
		file, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if !withGenerated && ast.IsGenerated(file) {
			return nil
		}
		f(path, fset, file)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// No function over maxLines lines, and none over explainAt without its
// reason in longFuncs.
func TestNoLongFunctions(t *testing.T) {
	long := map[string]bool{}
	goFiles(t, false, func(path string, fset *token.FileSet, file *ast.File) {
		if strings.HasSuffix(path, "_test.go") {
			return
		}
		rel, _ := filepath.Rel(root, path)
		for _, d := range file.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
			n, key := end.Line-start.Line+1, filepath.ToSlash(rel)+":"+funcName(fn)
			switch {
			case n > maxLines:
				t.Errorf("%s:%d: %s is %d lines, at most %d: split it where a name explains a part", path, start.Line, fn.Name.Name, n, maxLines)
			case n > explainAt && longFuncs[key] == "":
				t.Errorf("%s:%d: %s is %d lines: over %d, say why in longFuncs (%q) or split it", path, start.Line, fn.Name.Name, n, explainAt, key)
			case n > explainAt:
				long[key] = true
			}
		}
	})
	for key := range longFuncs {
		if !long[key] {
			t.Errorf("longFuncs names %s, which is not over %d lines (or gone): drop the entry", key, explainAt)
		}
	}
}

// funcName is fn's name, "Type.Method" for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	typ := fn.Recv.List[0].Type
	if star, ok := typ.(*ast.StarExpr); ok {
		typ = star.X
	}
	if idx, ok := typ.(*ast.IndexExpr); ok { // a generic type's method
		typ = idx.X
	}
	if id, ok := typ.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}

// declared is every name the Go code declares: types, functions,
// methods, constants, variables and struct fields.
func declared(t *testing.T) map[string]bool {
	names := map[string]bool{}
	goFiles(t, true, func(_ string, _ *token.FileSet, file *ast.File) {
		ast.Inspect(file, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.TypeSpec:
				names[x.Name.Name] = true
			case *ast.FuncDecl:
				names[x.Name.Name] = true
			case *ast.ValueSpec:
				for _, id := range x.Names {
					names[id.Name] = true
				}
			case *ast.Field:
				for _, id := range x.Names {
					names[id.Name] = true
				}
			}
			return true
		})
	})
	return names
}

// goName is a backticked Go name in the docs: `Name`, `pkg.Name`,
// `Type.Method`, or an unexported actor type such as `connActor`.
var goName = regexp.MustCompile("`(?:[a-z]+\\.)?((?:[A-Z][a-z0-9]+){2,}[A-Za-z0-9]*|[A-Z][a-z0-9]+|[a-z]+Actor)(?:\\.([A-Z][A-Za-z0-9]*))?(?:\\(\\))?`")

// The docs name only Go names that exist, so they cannot keep citing a
// type after it was renamed or removed.
func TestDocsNameExistingTypes(t *testing.T) {
	names := declared(t)
	docs, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, filepath.Join(root, "README.md"))
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goName.FindAllStringSubmatch(string(b), -1) {
			for _, name := range m[1:] {
				if name != "" && !names[name] && !notGo[name] {
					t.Errorf("%s names %s (in %s), which no Go code declares", filepath.Base(doc), name, m[0])
				}
			}
		}
	}
}

// notGo are names of other systems the docs quote in backticks, which
// look like Go names.
var notGo = map[string]bool{
	"OrderedReady": true, // a Kubernetes StatefulSet's podManagementPolicy
	"Host":         true, // the HTTP header
	"Engine":       true, // nbio's nbhttp.Engine
	"CheckUtf8":    true, // nbio's Engine field that checks text frames
	// proto.actor's: a remote endpoint's end, and the message a watcher
	// gets with its reason
	"EndpointTerminatedEvent": true,
	"Terminated":              true,
	"AddressTerminated":       true,
}
