package env_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

func ExampleBinding_Resolve() {
	dir, _ := os.MkdirTemp("", "weft-example")
	defer os.RemoveAll(dir)
	work, docs := filepath.Join(dir, "work"), filepath.Join(dir, "docs")
	os.Mkdir(work, 0o755)
	os.Mkdir(docs, 0o755)

	b, err := env.NewBinding(1, []event.Mount{
		{ID: "work", Kind: event.KindLocal, Path: work, Mode: event.ModeReadWrite, Default: true},
		{ID: "docs", Kind: event.KindLocal, Path: docs, Mode: event.ModeReadOnly},
	})
	if err != nil {
		panic(err)
	}
	defer b.Close()

	p, _ := b.Resolve("src/../main.go", env.Write)
	fmt.Println(p, p.WriteFile([]byte("package main\n")))

	for _, path := range []string{"/environment/docs/notes.md", "../../etc/passwd", "/etc/passwd", "/environment/tmp/x"} {
		_, err := b.Resolve(path, env.Write)
		fmt.Println(errors.Is(err, env.ErrReadOnly), errors.Is(err, env.ErrOutside), errors.Is(err, env.ErrNoMount), err)
	}
	// Output:
	// /environment/work/main.go <nil>
	// true false false /environment/docs/notes.md: read-only mount "docs": writes are refused
	// false true false ../../etc/passwd: outside mount "work": ".." escapes the mount root
	// false true false /etc/passwd: outside mount: only /environment is visible
	// false false true /environment/tmp/x: no such mount "tmp": unknown mount; mounts: /environment/work, /environment/docs
}
