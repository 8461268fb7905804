// Package embedtest holds the test that the README's recipe for using
// weft from another Go program works: a module outside this repository
// that requires weft.dev/weft with a replace line pointing at the
// checkout builds and runs the README's program. It has no code of its
// own.
package embedtest
