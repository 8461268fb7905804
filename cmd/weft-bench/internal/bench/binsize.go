package bench

import (
	"cmp"
	"debug/buildinfo"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
)

// Buckets of a binary's bytes that belong to no module.
const (
	stdModule     = "std"
	cModule       = "C (cgo)"
	linkerData    = "go:* linker data"
	funcTablesSym = "go:func.*"
)

// moduleIndex maps package paths, and the symbol names of a Go binary, to
// the module that holds them: the binary's main module and dependencies
// as its build information lists them, "std" for the standard library.
type moduleIndex struct {
	main  string   // the main module, whose command is package main
	paths []string // longest first, so that a nested module wins
}

// newModuleIndex returns the index of the main module and its
// dependencies.
func newModuleIndex(main string, deps []string) moduleIndex {
	p := append([]string{main}, deps...)
	p = slices.DeleteFunc(p, func(s string) bool { return s == "" })
	slices.SortFunc(p, func(a, b string) int { return cmp.Or(cmp.Compare(len(b), len(a)), cmp.Compare(a, b)) })
	return moduleIndex{main: main, paths: slices.Compact(p)}
}

// modulesOf returns the module index of the Go binary at path.
func modulesOf(path string) (moduleIndex, error) {
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		return moduleIndex{}, err
	}
	var deps []string
	for _, d := range bi.Deps {
		deps = append(deps, d.Path) // the path the code imports, even if replaced
	}
	return newModuleIndex(bi.Main.Path, deps), nil
}

// prefixModule returns the module whose path begins s and is followed in s
// by end, '/' or '.', or "".
func (m moduleIndex) prefixModule(s string) string {
	for _, p := range m.paths {
		if strings.HasPrefix(s, p) && (len(s) == len(p) || s[len(p)] == '/' || s[len(p)] == '.') {
			return p
		}
	}
	return ""
}

// pkgModule returns the module of the package with import path pkg:
// a listed module, "std" when the path's first element has no dot (the
// standard library's own, vendor/… included), else "" (unknown).
func (m moduleIndex) pkgModule(pkg string) string {
	if mod := m.prefixModule(pkg); mod != "" {
		return mod
	}
	first, _, _ := strings.Cut(pkg, "/")
	if !strings.Contains(first, ".") {
		return stdModule
	}
	return ""
}

// symbolModule returns the bucket of a symbol of a Go binary: the module
// of the package that defines it (for a type descriptor or an itab, of
// the first package its name mentions), "std", "C (cgo)" for C symbols,
// or "go:* linker data" for the linker's own symbols (go:buildinfo, …);
// a package of no listed module is its own bucket.
func (m moduleIndex) symbolModule(name string) string {
	switch {
	case strings.HasPrefix(name, "type:"), strings.HasPrefix(name, "go:itab."):
		// type:*weft.dev/weft/event.Event, type:map[string]*x.T,
		// go:itab.*net/http.Server,io.Closer: the first module named.
		s := name[strings.IndexByte(name, ':')+1:]
		s = strings.TrimPrefix(s, "itab.")
		for i := 0; i < len(s); i++ {
			if i > 0 && !strings.ContainsRune(" *[](),;{}.", rune(s[i-1])) {
				continue
			}
			if mod := m.prefixModule(s[i:]); mod != "" {
				return mod
			}
		}
		return stdModule
	case strings.HasPrefix(name, "go:"):
		return linkerData
	}
	if mod := m.prefixModule(name); mod != "" {
		return mod
	}
	// runtime.main, net/http.(*Server).Serve, vendor/golang.org/x/….F,
	// main.main: the package path ends at the first dot after its last
	// slash; the standard library's first element has no dot.
	pkg := name
	if i := strings.IndexAny(pkg, "[("); i >= 0 {
		pkg = pkg[:i]
	}
	slash := strings.LastIndexByte(pkg, '/')
	dot := strings.IndexByte(pkg[slash+1:], '.')
	if dot < 0 {
		return cModule // x_cgo_init, crosscall2, __libc_csu_init
	}
	if pkg[:slash+1+dot] == "main" && m.main != "" {
		return m.main
	}
	if mod := m.pkgModule(pkg[:slash+1+dot]); mod != "" {
		return mod
	}
	return pkg[:slash+1+dot] // a package of no listed module: its own bucket
}

// binarySize is what a Go ELF binary's bytes are made of.
type binarySize struct {
	File       int64 // the file's size
	Loaded     int64 // the sections loaded into memory from the file
	Text       int64 // .text: machine code
	FuncTables int64 // .gopclntab and go:func.*: the runtime's function metadata
	ReadOnly   int64 // .rodata, .typelink, .itablink (less go:func.*)
	Data       int64 // .data, .noptrdata, .go.buildinfo …
	Debug      int64 // .debug_*: DWARF, which -ldflags=-w leaves out
	Symbols    bool  // the binary has a symbol table (not built with -s)
	// Modules is the loaded size per bucket: each module's code and data
	// symbols plus its share of the function tables, in proportion to its
	// code. Sorted largest first.
	Modules []moduleSize
}

// moduleSize is one module's share of a binary.
type moduleSize struct {
	Module string
	Bytes  int64 // code and data symbols
	Code   int64 // of which code
	Share  int64 // Bytes plus the function tables' share
}

// measureBinary reads the Go ELF binary at path: its sections and, when
// it has a symbol table, the size of every symbol, grouped by module.
func measureBinary(path string) (*binarySize, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bs := &binarySize{File: st.Size()}
	for _, s := range f.Sections {
		switch {
		case strings.HasPrefix(s.Name, ".debug_") || strings.HasPrefix(s.Name, ".zdebug_"):
			bs.Debug += int64(s.Size)
			continue
		case s.Flags&elf.SHF_ALLOC == 0 || s.Type == elf.SHT_NOBITS:
			continue
		}
		bs.Loaded += int64(s.Size)
		switch {
		case s.Name == ".text":
			bs.Text += int64(s.Size)
		case s.Name == ".gopclntab":
			bs.FuncTables += int64(s.Size)
		case s.Flags&elf.SHF_WRITE == 0 && s.Flags&elf.SHF_EXECINSTR == 0:
			bs.ReadOnly += int64(s.Size)
		case s.Flags&elf.SHF_WRITE != 0:
			bs.Data += int64(s.Size)
		}
	}
	syms, err := f.Symbols()
	if errors.Is(err, elf.ErrNoSymbols) {
		return bs, nil
	}
	if err != nil {
		return nil, fmt.Errorf("symbols: %w", err)
	}
	bs.Symbols = true
	mods, err := modulesOf(path)
	if err != nil {
		return nil, fmt.Errorf("build information: %w", err)
	}
	bs.Modules = groupSymbols(f.Sections, syms, mods, bs)
	return bs, nil
}

// groupSymbols adds up the symbols that occupy the file by module, counts
// the function metadata in .rodata (the symbol go:func.*) in
// bs.FuncTables, and shares the function tables among the modules in
// proportion to their code.
func groupSymbols(sections []*elf.Section, syms []elf.Symbol, mods moduleIndex, bs *binarySize) []moduleSize {
	by := map[string]*moduleSize{}
	var code int64
	for _, s := range syms {
		if s.Size == 0 || int(s.Section) <= 0 || int(s.Section) >= len(sections) {
			continue
		}
		sec := sections[s.Section]
		if sec.Flags&elf.SHF_ALLOC == 0 || sec.Type == elf.SHT_NOBITS || sec.Name == ".gopclntab" {
			continue
		}
		if s.Name == funcTablesSym {
			bs.FuncTables += int64(s.Size)
			bs.ReadOnly -= int64(s.Size)
			continue
		}
		mod := mods.symbolModule(s.Name)
		m := by[mod]
		if m == nil {
			m = &moduleSize{Module: mod}
			by[mod] = m
		}
		m.Bytes += int64(s.Size)
		if sec.Flags&elf.SHF_EXECINSTR != 0 {
			m.Code += int64(s.Size)
			code += int64(s.Size)
		}
	}
	out := make([]moduleSize, 0, len(by))
	for _, m := range by {
		m.Share = m.Bytes
		if code > 0 {
			m.Share += int64(float64(bs.FuncTables) * float64(m.Code) / float64(code))
		}
		out = append(out, *m)
	}
	slices.SortFunc(out, func(a, b moduleSize) int {
		return cmp.Or(cmp.Compare(b.Share, a.Share), cmp.Compare(a.Module, b.Module))
	})
	return out
}
