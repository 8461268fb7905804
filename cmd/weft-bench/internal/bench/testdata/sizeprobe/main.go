// Command sizeprobe is a small Go program for the tests of the binary
// size analysis: code of the standard library, of this module and of one
// dependency (goleak).
package main

import (
	"fmt"
	"os"

	"go.uber.org/goleak"
)

func main() {
	if len(os.Args) > 1 {
		fmt.Println(goleak.Find())
	}
}
