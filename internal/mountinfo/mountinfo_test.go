package mountinfo_test

import (
	"testing"

	"weft.dev/weft/internal/mountinfo"
)

func TestUnescape(t *testing.T) {
	for in, want := range map[string]string{
		"/plain":          "/plain",
		`/with\040space`:  "/with space",
		`/tab\011nl\012`:  "/tab\tnl\n",
		`/back\134slash`:  `/back\slash`,
		`/end\04`:         `/end\04`,
		`/not\999octal`:   `/not\999octal`,
		`\040`:            " ",
		`/trailing\`:      `/trailing\`,
		`/two\040\040adj`: "/two  adj",
	} {
		if got := mountinfo.Unescape(in); got != want {
			t.Errorf("Unescape(%q) = %q, want %q", in, got, want)
		}
	}
}
