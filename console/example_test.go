package console_test

import (
	"fmt"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"

	"weft.dev/weft/console"
)

// Handler serves the page and its assets from the binary; `weft serve`
// mounts it at / behind its own login (package rpc).
func ExampleHandler() {
	srv := httptest.NewServer(console.Handler())
	defer srv.Close()
	resp, err := http.Get(srv.URL + "/")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.StatusCode, strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html"))
	// Output: 200 true
}

// Assets holds the files the page is made of, methods.js (generated from
// the method table) among them.
func ExampleAssets() {
	_, err := fs.Stat(console.Assets(), "assets/methods.js")
	fmt.Println(err == nil)
	// Output: true
}
