package main

import (
	"reflect"
	"strings"
	"testing"
)

// TestCommandTree checks that args naming a command get a tree of the
// global flags and that command alone (with the flags that follow its
// name), and that help, no command, flags of the default command before a
// name and unknown names get the whole tree (nil).
func TestCommandTree(t *testing.T) {
	full := reflect.TypeFor[cli]()
	for i := range full.NumField() {
		f := full.Field(i)
		if _, ok := f.Tag.Lookup("cmd"); !ok {
			continue
		}
		name := f.Tag.Get("name")
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		for _, args := range [][]string{{name}, {"--store", "x.db", name, "a"}, {"--host=h:1", name}, {"--tls-ca", "ca.pem", name}, {"--tls-ca=ca.pem", name},
			{name, "--flag", "x", "-y"}, {"--store=x.db", name, "-p", "--host"}} {
			tree := commandTree(args)
			if tree == nil {
				t.Fatalf("%q: the whole tree", args)
			}
			if tree.NumField() != 4 || tree.Field(3).Name != f.Name || tree.Field(3).Tag != f.Tag ||
				tree.Field(0).Name != "Store" || tree.Field(1).Name != "Host" || tree.Field(2).Name != "TLSCA" {
				t.Errorf("%q: tree %v", args, tree)
			}
		}
	}
	for _, args := range [][]string{nil, {"--help"}, {"ps", "--help"}, {"ps", "-h"}, {"-m", "x"}, {"bogus"}, {"--", "ps"}, {"--store"},
		{"-m", "x", "run"}, {"run", "-p", "x", "--help"}} {
		if tree := commandTree(args); tree != nil {
			t.Errorf("%q: tree %v, want the whole tree", args, tree)
		}
	}
}
