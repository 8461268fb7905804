package console_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"weft.dev/weft/rpc"
)

var update = flag.Bool("update", false, "rewrite static/assets/methods.js from the method table")

// methodsJS renders the page's method list from the OpenRPC document of
// the method table: each method's params (name, JSON type, required),
// whether it is a notification's, and the event types, with a JSDoc
// typedef per method for editors.
func methodsJS(t *testing.T) []byte {
	raw, err := rpc.HostDocument(rpc.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Methods []struct {
			Name   string `json:"name"`
			Params []struct {
				Name     string          `json:"name"`
				Required bool            `json:"required"`
				Schema   json.RawMessage `json:"schema"`
			} `json:"params"`
		} `json:"methods"`
		Notifications []struct {
			Name string `json:"name"`
		} `json:"x-notifications"`
		Events []struct {
			Name string `json:"name"`
		} `json:"x-events"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	jsType := func(schema json.RawMessage) string {
		var s struct {
			Type  any   `json:"type"`
			OneOf []any `json:"oneOf"`
		}
		json.Unmarshal(schema, &s)
		var types []string
		switch v := s.Type.(type) {
		case string:
			types = []string{v}
		case []any:
			for _, x := range v {
				types = append(types, fmt.Sprint(x))
			}
		}
		var out []string
		for _, ty := range types {
			switch ty {
			case "string", "boolean", "null":
				out = append(out, ty)
			case "integer", "number":
				out = append(out, "number")
			case "object":
				out = append(out, "Object")
			case "array":
				out = append(out, "Array<*>")
			}
		}
		if len(out) == 0 {
			return "*"
		}
		return strings.Join(out, "|")
	}
	var b bytes.Buffer
	b.WriteString("// Code generated from weft's method table by `go generate ./console`; DO NOT EDIT.\n")
	b.WriteString("// The console's client (rpc.js) refuses a method or a param that is not here,\n")
	b.WriteString("// and a Go test fails when this file differs from the table.\n// @ts-check\n\n")
	var body bytes.Buffer
	body.WriteString("/** Every method: its params' JSON types; a trailing ? marks an optional one. */\nexport const methods = Object.freeze({\n")
	for _, m := range doc.Methods {
		var fields, entries []string
		for _, p := range m.Params {
			ty := jsType(p.Schema)
			opt := "?"
			if p.Required {
				opt = ""
			}
			fields = append(fields, fmt.Sprintf("%s%s: %s", p.Name, opt, ty))
			entries = append(entries, fmt.Sprintf("%q: %q", p.Name, ty+opt))
		}
		name := typedefName(m.Name)
		fmt.Fprintf(&b, "/** @typedef {{%s}} %sParams */\n", strings.Join(fields, ", "), name)
		fmt.Fprintf(&body, "  %q: Object.freeze({%s}),\n", m.Name, strings.Join(entries, ", "))
	}
	body.WriteString("});\n\n/** The notifications a host sends. */\nexport const notifications = Object.freeze([\n")
	for _, n := range doc.Notifications {
		fmt.Fprintf(&body, "  %q,\n", n.Name)
	}
	body.WriteString("]);\n\n/** The event types of a session's log. */\nexport const eventTypes = Object.freeze([\n")
	names := make([]string, 0, len(doc.Events))
	for _, e := range doc.Events {
		names = append(names, e.Name)
	}
	slices.Sort(names)
	for _, n := range names {
		fmt.Fprintf(&body, "  %q,\n", n)
	}
	body.WriteString("]);\n")
	b.WriteString("\n")
	b.Write(body.Bytes())
	return b.Bytes()
}

// typedefName turns "session/create" into "SessionCreate".
func typedefName(method string) string {
	var out strings.Builder
	for _, part := range strings.FieldsFunc(method, func(r rune) bool { return r == '/' || r == '.' }) {
		out.WriteString(strings.ToUpper(part[:1]) + part[1:])
	}
	return out.String()
}

// TestMethodsJS fails when the page's method list differs from the
// method table: a method or param added, renamed or removed without the
// page knowing. `go generate ./console` rewrites it.
func TestMethodsJS(t *testing.T) {
	want := methodsJS(t)
	path := filepath.Join("static", "assets", "methods.js")
	if *update {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the method table makes: run `go generate ./console`", path)
	}
}
