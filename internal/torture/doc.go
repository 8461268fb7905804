// Package torture holds weft's crash-torture test: a `weft serve`
// subprocess under load is SIGKILLed at random points, restarted, and its
// store checked after every kill and every restart. The package has no code
// outside its tests; torture_test.go says what is checked, and
// scripts/torture N runs N kills by hand.
package torture
