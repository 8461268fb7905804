package host

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"weft.dev/weft/agent"
	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/host/internal/journal"
	"weft.dev/weft/host/internal/session"
	"weft.dev/weft/process"
	"weft.dev/weft/store"
)

// sentinelPackages are the packages whose sentinel errors can reach a
// client, by directory relative to this one.
var sentinelPackages = map[string]string{
	"store": "../store", "process": "../process", "env": "../env", "journal": "internal/journal",
	"session": "internal/session", "agent": "../agent", "api": "../api",
}

// TestEverySentinelHasAKind is the one table from every sentinel error of
// the packages a request passes through to the api.Kind (and so the wire
// code) a client sees for it, with its cause kept for errors.Is. It reads
// the packages' sources: a new exported Err… variable without a row here
// fails it.
func TestEverySentinelHasAKind(t *testing.T) {
	table := []struct {
		name string
		err  error
		kind api.Kind
	}{
		{"store.ErrNotFound", store.ErrNotFound, api.KindNotFound},
		{"store.ErrSeqConflict", store.ErrSeqConflict, api.KindStorageUnavailable},
		{"store.ErrInvalid", store.ErrInvalid, api.KindInvalidParams},
		{"store.ErrClosed", store.ErrClosed, api.KindStorageUnavailable},
		{"store.ErrReceiptExists", store.ErrReceiptExists, api.KindIdempotencyConflict},
		{"store.ErrFenced", store.ErrFenced, api.KindRunConflict},
		{"store.ErrLeaseHeld", store.ErrLeaseHeld, api.KindRunConflict},
		{"store.ErrInUse", store.ErrInUse, api.KindRunConflict},
		{"store.ErrForkSource", store.ErrForkSource, api.KindRunConflict},
		{"process.ErrNotFound", process.ErrNotFound, api.KindNotFound},
		{"process.ErrDenied", process.ErrDenied, api.KindDenied},
		{"process.ErrEnded", process.ErrEnded, api.KindRunConflict},
		{"process.ErrCancelled", process.ErrCancelled, api.KindRunConflict},
		{"process.ErrExists", process.ErrExists, api.KindAlreadyExists},
		{"process.ErrClosed", process.ErrClosed, api.KindOverloaded},
		{"process.ErrInvalid", process.ErrInvalid, api.KindInvalidParams},
		{"env.ErrOutside", env.ErrOutside, api.KindEnvironmentUnavailable},
		{"env.ErrReadOnly", env.ErrReadOnly, api.KindEnvironmentUnavailable},
		{"env.ErrNoMount", env.ErrNoMount, api.KindEnvironmentUnavailable},
		{"env.ErrBadPath", env.ErrBadPath, api.KindEnvironmentUnavailable},
		{"env.ErrNotRegular", env.ErrNotRegular, api.KindEnvironmentUnavailable},
		{"env.ErrTooLarge", env.ErrTooLarge, api.KindInvalidParams},
		{"env.ErrDenied", env.ErrDenied, api.KindDenied},
		{"env.ErrProtected", env.ErrProtected, api.KindDenied},
		{"journal.ErrClosed", journal.ErrClosed, api.KindOverloaded},
		{"journal.ErrCursor", journal.ErrCursor, api.KindCursorInvalid},
		{"journal.ErrLagged", journal.ErrLagged, api.KindOverloaded},
		{"session.ErrClosed", session.ErrClosed, api.KindOverloaded},
		{"agent.ErrHostStopped", agent.ErrHostStopped, api.KindOverloaded},
		{"agent.ErrSteersClosed", agent.ErrSteersClosed, api.KindRunConflict},
		{"api.ErrLagged", api.ErrLagged, api.KindOverloaded},
		{"api.ErrBadHandle", api.ErrBadHandle, api.KindInvalidParams},
		{"api.ErrHandleNotObject", api.ErrHandleNotObject, api.KindInvalidParams},
		{"api.ErrHandleNoKind", api.ErrHandleNoKind, api.KindInvalidParams},
		{"api.ErrHandleKind", api.ErrHandleKind, api.KindInvalidParams},
		{"api.ErrHandleNoID", api.ErrHandleNoID, api.KindInvalidParams},
	}
	var rows []string
	for _, r := range table {
		rows = append(rows, r.name)
		got := apiError(fmt.Errorf("doing something: %w", r.err))
		var ae *api.Error
		if !errors.As(got, &ae) {
			t.Errorf("%s: %v is not an *api.Error", r.name, got)
			continue
		}
		code, _ := api.CodeOf(r.kind)
		if ae.Kind != r.kind || ae.Code != code {
			t.Errorf("%s: kind %s, code %d; want %s, %d", r.name, ae.Kind, ae.Code, r.kind, code)
		}
		if !errors.Is(got, r.err) {
			t.Errorf("%s: the cause is lost: %v", r.name, got)
		}
	}
	for _, name := range sentinels(t) {
		if !slices.Contains(rows, name) {
			t.Errorf("sentinel %s has no row in the table: map it in apiError and add it here", name)
		}
	}
}

// sentinels returns the exported package-level Err… variables of
// sentinelPackages that are plain errors (not *api.Error, which carry
// their kind), as "pkg.Name".
func sentinels(t *testing.T) []string {
	var out []string
	for pkg, dir := range sentinelPackages {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no sources in %s (%v)", pkg, dir, err)
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			src, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			af, err := parser.ParseFile(token.NewFileSet(), f, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range af.Decls {
				gd, ok := d.(*ast.GenDecl)
				if !ok || gd.Tok != token.VAR {
					continue
				}
				for _, s := range gd.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if !n.IsExported() || !strings.HasPrefix(n.Name, "Err") || i >= len(vs.Values) {
							continue
						}
						if isNewError(vs.Values[i]) {
							continue // an *api.Error: its kind is its own
						}
						out = append(out, pkg+"."+n.Name)
					}
				}
			}
		}
	}
	return out
}

// isNewError reports whether e is a call of api.NewError.
func isNewError(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok {
		return false
	}
	switch fn := call.Fun.(type) {
	case *ast.Ident:
		return fn.Name == "NewError"
	case *ast.SelectorExpr:
		return fn.Sel.Name == "NewError"
	}
	return false
}
