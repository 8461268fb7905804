package rpc_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/jsonschema-go/jsonschema"

	"weft.dev/weft/api"
	"weft.dev/weft/internal/filled"
	"weft.dev/weft/rpc"
	"weft.dev/weft/rpc/rpctest"
)

// hostDocument returns the OpenRPC document of the method table, decoded.
func hostDocument(t *testing.T) (*rpctest.Document, json.RawMessage) {
	t.Helper()
	raw, err := rpc.HostDocument(rpc.Config{ServerInfo: rpc.Info{Name: "weft", Version: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	var doc rpctest.Document
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatalf("decode the document: %v", err)
	}
	return &doc, raw
}

// The OpenRPC document is generated from the table: every method with
// its params and result schemas, mutating and stream flags; every
// notification, event type and error code.
func TestHostDocumentCoversTable(t *testing.T) {
	doc, raw := hostDocument(t)
	byName := map[string]rpctest.Method{}
	for _, m := range doc.Methods {
		byName[m.Name] = m
	}
	table := api.Methods()
	if len(doc.Methods) != len(table) {
		t.Errorf("the document has %d methods; the table %d", len(doc.Methods), len(table))
	}
	for _, d := range table {
		info := d.Info()
		m, ok := byName[info.Name]
		switch {
		case !ok:
			t.Errorf("%s: not in the document", info.Name)
			continue
		case m.Description != info.Doc:
			t.Errorf("%s: description %q, want %q", info.Name, m.Description, info.Doc)
		case m.ParamsSchema["type"] != "object" || m.ParamsSchema["additionalProperties"] == nil:
			t.Errorf("%s: params schema %v: want a closed object", info.Name, m.ParamsSchema)
		case len(m.Result.Schema) == 0:
			t.Errorf("%s: no result schema", info.Name)
		case m.Mutating != info.Mutating:
			t.Errorf("%s: x-mutating %v, want %v", info.Name, m.Mutating, info.Mutating)
		case !slices.Equal(m.Notifications, info.Notifications):
			t.Errorf("%s: x-notifications %v, want %v", info.Name, m.Notifications, info.Notifications)
		}
	}
	notes := map[string]bool{}
	for _, n := range doc.Notifications {
		if len(n.ParamsSchema) == 0 || n.Description == "" {
			t.Errorf("notification %s: no params schema or description", n.Name)
		}
		notes[n.Name] = true
	}
	for _, n := range api.Notifications() {
		if !notes[n.Name] {
			t.Errorf("notification %s: not in the document", n.Name)
		}
	}
	events := map[string]bool{}
	for _, e := range doc.Events {
		events[e.Name] = len(e.Schema) > 0
	}
	for _, e := range api.Events() {
		if !events[string(e.Type)] {
			t.Errorf("event %s: not in the document, or without a schema", e.Type)
		}
	}
	kinds := map[string]bool{}
	for _, e := range doc.Errors {
		kinds[e.Kind] = e.Code != 0
	}
	for _, k := range api.Kinds() {
		if !kinds[string(k)] {
			t.Errorf("error kind %s: not in the document, or without a code", k)
		}
	}

	// rpc.discover of a host server is the same document.
	s := rpc.NewHostServer(nil, rpc.HostConfig{Config: rpc.Config{ServerInfo: rpc.Info{Name: "weft", Version: "test"}}})
	defer s.Close()
	served := rpctest.Discover(t, s)
	want, _ := json.Marshal(doc)
	got, _ := json.Marshal(served)
	if !bytes.Equal(got, want) {
		t.Errorf("rpc.discover differs from rpc.HostDocument")
	}
	if !json.Valid(raw) {
		t.Error("the document is not valid JSON")
	}
}

// Every method's params round-trip: params with every field set encode
// to JSON that the document's params schema accepts, and decode (with
// unknown fields refused, as the server does) to the same params. A
// schema that disagrees with the Go type — a renamed field, a missing
// one, a type the schema describes otherwise — fails here.
func TestHostDocumentParamsRoundTrip(t *testing.T) {
	doc, _ := hostDocument(t)
	schemas := map[string]map[string]any{}
	for _, m := range doc.Methods {
		schemas[m.Name] = m.ParamsSchema
	}
	for _, d := range api.Methods() {
		info := d.Info()
		rs := resolve(t, info.Name, schemas[info.Name])
		if rs == nil {
			continue
		}
		for _, full := range []bool{false, true} {
			p := d.NewParams()
			if full {
				filled.Fill(reflect.ValueOf(p).Elem())
			}
			b, err := json.Marshal(p)
			if err != nil {
				t.Errorf("%s: encode: %v", info.Name, err)
				continue
			}
			var instance any
			json.Unmarshal(b, &instance)
			// Zero params may lack required fields; full ones must pass.
			if err := rs.Validate(instance); err != nil && full {
				t.Errorf("%s: the schema refuses %s: %v", info.Name, b, err)
			}
			back := d.NewParams()
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			if err := dec.Decode(back); err != nil {
				t.Errorf("%s: decode %s: %v", info.Name, b, err)
				continue
			}
			if !reflect.DeepEqual(back, p) {
				t.Errorf("%s: %s decodes to %+v, want %+v", info.Name, b, back, p)
			}
		}
	}
}

// resolve compiles a params schema of the document.
func resolve(t *testing.T, name string, m map[string]any) *jsonschema.Resolved {
	t.Helper()
	b, _ := json.Marshal(m)
	var s jsonschema.Schema
	if err := json.Unmarshal(b, &s); err != nil {
		t.Errorf("%s: params schema: %v", name, err)
		return nil
	}
	rs, err := s.Resolve(nil)
	if err != nil {
		t.Errorf("%s: params schema: %v", name, err)
		return nil
	}
	return rs
}

// docRow is a method's row in docs/protocol.md: its params cell.
type docRow struct {
	params string
	line   int
}

// protocolRows reads the method tables of docs/protocol.md: rows whose
// first cell names methods ("`run/start`", "`process/grant`,
// `process/revoke`").
func protocolRows(t *testing.T) map[string]docRow {
	t.Helper()
	b, err := os.ReadFile("../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	name := regexp.MustCompile("`([a-z.]+(?:/[a-z_]+)?)`")
	rows := map[string]docRow{}
	inTable := false
	for i, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "| method | params | result |") {
			inTable = true
			continue
		}
		if !strings.HasPrefix(line, "|") {
			inTable = false
			continue
		}
		if !inTable || strings.HasPrefix(line, "|---") {
			continue
		}
		cells := splitRow(line)
		if len(cells) < 3 {
			t.Errorf("docs/protocol.md:%d: a method row with %d cells", i+1, len(cells))
			continue
		}
		for _, m := range name.FindAllStringSubmatch(cells[0], -1) {
			if _, dup := rows[m[1]]; dup {
				t.Errorf("docs/protocol.md:%d: %s has a second row", i+1, m[1])
			}
			rows[m[1]] = docRow{params: cells[1], line: i + 1}
		}
	}
	return rows
}

// splitRow splits a markdown table row on the pipes that are not
// escaped (\|).
func splitRow(line string) []string {
	line = strings.Trim(strings.TrimSpace(line), "|")
	var cells []string
	var cur strings.Builder
	for i := 0; i < len(line); i++ {
		switch {
		case line[i] == '\\' && i+1 < len(line) && line[i+1] == '|':
			cur.WriteByte('|')
			i++
		case line[i] == '|':
			cells = append(cells, strings.TrimSpace(cur.String()))
			cur.Reset()
		default:
			cur.WriteByte(line[i])
		}
	}
	return append(cells, strings.TrimSpace(cur.String()))
}

// docFields returns the top-level fields a params cell names
// ("`{sessionId, after?, runId?}`"): each with whether it is marked
// optional. ok is false for a cell that describes its params otherwise
// ("as `request/list`").
func docFields(cell string) (fields map[string]bool, ok bool) {
	start := strings.Index(cell, "`{")
	end := strings.LastIndex(cell, "}`")
	if start < 0 || end < start {
		return nil, false
	}
	s := cell[start+2 : end]
	fields = map[string]bool{}
	depth := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			j := strings.IndexByte(s[i+1:], '"')
			if j < 0 {
				return fields, true
			}
			i += j + 1
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
		case depth == 0 && (c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'):
			j := i
			for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z' || s[j] >= '0' && s[j] <= '9') {
				j++
			}
			word := s[i:j]
			// A field is followed by ?, :, a separator or the end.
			rest := strings.TrimLeft(s[j:], " ")
			if rest == "" || strings.ContainsAny(rest[:1], "?:,|()+") {
				fields[word] = strings.HasPrefix(rest, "?")
			}
			i = j - 1
		}
	}
	return fields, true
}

// docs/protocol.md lists every method of the table, and no other, each
// with the params the schema has: the same names, those the schema
// requires not marked optional (?).
func TestProtocolDocMatchesTable(t *testing.T) {
	doc, _ := hostDocument(t)
	rows := protocolRows(t)
	for _, m := range doc.Methods {
		row, ok := rows[m.Name]
		if !ok {
			t.Errorf("docs/protocol.md has no row for %s", m.Name)
			continue
		}
		delete(rows, m.Name)
		fields, ok := docFields(row.params)
		if !ok {
			continue
		}
		props, _ := m.ParamsSchema["properties"].(map[string]any)
		var required []string
		req, _ := m.ParamsSchema["required"].([]any)
		for _, r := range req {
			required = append(required, fmt.Sprint(r))
		}
		for f, optional := range fields {
			if _, ok := props[f]; !ok {
				t.Errorf("docs/protocol.md:%d: %s has no param %s", row.line, m.Name, f)
			} else if optional && slices.Contains(required, f) {
				t.Errorf("docs/protocol.md:%d: %s: %s is required, not optional", row.line, m.Name, f)
			}
		}
		for p := range props {
			if _, ok := fields[p]; !ok {
				t.Errorf("docs/protocol.md:%d: %s: param %s is not documented", row.line, m.Name, p)
			}
		}
	}
	for name, row := range rows {
		t.Errorf("docs/protocol.md:%d: %s is not a method of the table", row.line, name)
	}
}
