package rpc

import (
	"crypto/sha256"
	"go/ast"
	"go/parser"
	"go/token"
	"testing"
)

func TestTokenMatches(t *testing.T) {
	want := sha256.Sum256([]byte("tok"))
	for _, tt := range []struct {
		in string
		ok bool
	}{{"tok", true}, {"tok2", false}, {"to", false}, {"", false}, {"TOK", false}} {
		if got := tokenMatches(want, tt.in); got != tt.ok {
			t.Errorf("tokenMatches(%q) = %v", tt.in, got)
		}
	}
}

// TestTokenCompareIsConstantTime checks the source: tokenMatches must
// compare with crypto/subtle and never with == on the secret.
func TestTokenCompareIsConstantTime(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "auth.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != "tokenMatches" {
			continue
		}
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok && x.Name == "subtle" && n.Sel.Name == "ConstantTimeCompare" {
					found = true
				}
			case *ast.BinaryExpr:
				if n.Op == token.EQL || n.Op == token.NEQ {
					if _, isLit := n.Y.(*ast.BasicLit); !isLit {
						t.Errorf("tokenMatches compares with %s", n.Op)
					}
				}
			}
			return true
		})
	}
	if !found {
		t.Error("tokenMatches does not use subtle.ConstantTimeCompare")
	}
}
