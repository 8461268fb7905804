package policy_test

import (
	"bytes"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"testing"

	"weft.dev/weft/api"
	"weft.dev/weft/policy"
)

// TestPresetsDocumented checks that docs/policy.md spells out each preset
// exactly: a ```json block after a heading "### <preset>".
func TestPresetsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range policy.Presets() {
		re := regexp.MustCompile("(?s)\n### `" + regexp.QuoteMeta(name) + "`\n.*?```json\n(.*?)```")
		m := re.FindSubmatch(doc)
		if m == nil {
			t.Errorf("docs/policy.md has no rules for %s", name)
			continue
		}
		var got []api.Rule
		if err := json.Unmarshal(m[1], &got); err != nil {
			t.Errorf("%s in docs/policy.md: %v", name, err)
			continue
		}
		want, _ := policy.PresetRules(name)
		if !slices.Equal(got, want) {
			b, _ := json.MarshalIndent(want, "", "  ")
			t.Errorf("%s in docs/policy.md differs from the code; the code says\n%s", name, b)
		}
	}
}

// TestDocExamplesCompile compiles every JSON example of docs/policy.md: a
// policy, a rule, or a list of rules.
func TestDocExamplesCompile(t *testing.T) {
	doc, err := os.ReadFile("../docs/policy.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```json\n(.*?)```").FindAllSubmatch(doc, -1)
	if len(blocks) < 8 {
		t.Fatalf("found %d JSON blocks", len(blocks))
	}
	for _, b := range blocks {
		var p api.Policy
		var probe map[string]json.RawMessage
		switch {
		case json.Unmarshal(b[1], &p.Rules) == nil:
		case json.Unmarshal(b[1], &probe) == nil && probe["tool"] != nil:
			var r api.Rule
			if err := strictDecode(b[1], &r); err != nil {
				t.Errorf("%s: %v", b[1], err)
			}
			p.Rules = []api.Rule{r}
		default:
			if err := strictDecode(b[1], &p); err != nil {
				t.Errorf("%s: %v", b[1], err)
			}
		}
		if _, err := policy.Compile(p); err != nil {
			t.Errorf("%s: %v", b[1], err)
		}
	}
}

func strictDecode(b []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}
