package sandbox

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestWireRoundTrip(t *testing.T) {
	p := Policy{
		Config: Config{Network: NetworkAllow, ReadOnly: []string{"/opt", "/nix"}, Executable: "/usr/bin/weft", LandlockABI: 5},
		Mounts: []Mount{{Path: "/home/u/src", Write: true}, {Path: "/home/u/docs"}},
	}
	probe := func() (int, error) { return 4, nil }
	c, err := command(t.Context(), p, probe, "/bin/sh", "-c", "echo hi")
	if err != nil {
		t.Fatal(err)
	}
	if c.Path != "/usr/bin/weft" || !reflect.DeepEqual(c.Args[1:], []string{HelperArg, "", "/bin/sh", "-c", "echo hi"}) {
		t.Errorf("path %q, args %q", c.Path, c.Args)
	}
	w := c.wire
	w.TempDir = "/tmp/weft-cmd-1"
	w.LiveFD, w.NetFD, w.NetBy = 3, 4, DeniedByNamespace
	w.Cgroups = []string{"/sys/fs/cgroup/pids/weft-cmd-1"}
	w.Rlimits = []wireRlimit{{Resource: 1, Max: 4096}}
	data, err := json.Marshal(w)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeWire(string(data))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, w) {
		t.Errorf("round trip:\n got %+v\nwant %+v", got, w)
	}
	want := wirePolicy{V: wireVersion, Network: "allow", Mounts: p.Mounts, ReadOnly: p.ReadOnly, TempDir: "/tmp/weft-cmd-1", ABI: 5,
		LiveFD: 3, NetFD: 4, NetBy: DeniedByNamespace, Cgroups: w.Cgroups, Rlimits: w.Rlimits}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
	if !IsHelper([]string{"weft", HelperArg, string(data), "/bin/sh"}) || IsHelper([]string{"weft", "run"}) || IsHelper([]string{"weft"}) {
		t.Error("IsHelper")
	}
	// The network defaults to deny; the policy is copied.
	p.Network = ""
	c, _ = command(t.Context(), p, probe, "/bin/sh")
	p.Mounts[0].Path = "/changed"
	if c.wire.Network != NetworkDeny || c.wire.Mounts[0].Path != "/home/u/src" {
		t.Errorf("wire %+v", c.wire)
	}
	if !c.Status.TCPDenied || !c.Status.UDPDenied || c.Status.NetworkDeniedBy == "" || c.Status.Warning() != "" {
		t.Errorf("status %+v, warning %q", c.Status, c.Status.Warning())
	}
}

func TestDecodeWireRejects(t *testing.T) {
	for _, s := range []string{
		``,
		`[]`,
		`{"v":3,"network":"deny","tempDir":"/t"} {}`,
		`{"v":1,"network":"deny","tempDir":"/t"}`,
		`{"v":4,"network":"deny","tempDir":"/t"}`,
		`{"v":3,"network":"","tempDir":"/t"}`,
		`{"v":3,"network":"deny","tempDir":"t"}`,
		`{"v":3,"network":"deny"}`,
		`{"v":3,"network":"deny","tempDir":"/t","mounts":[{"path":"rel"}]}`,
		`{"v":3,"network":"deny","tempDir":"/t","readOnly":["rel"]}`,
		`{"v":3,"network":"deny","tempDir":"/t","liveFD":2}`,
		`{"v":3,"network":"deny","tempDir":"/t","sandboxed":false}`,
		`{"v":3,"network":"deny","tempDir":"/t","abi":-1}`,
		`{"v":3,"network":"deny","tempDir":"/t","liveFD":4,"netFD":4}`,
		`{"v":3,"network":"deny","tempDir":"/t","netBy":"magic"}`,
		`{"v":3,"network":"deny","tempDir":"/t","cgroups":["rel"]}`,
	} {
		if w, err := decodeWire(s); err == nil {
			t.Errorf("decodeWire(%s) = %+v", s, w)
		}
	}
}

func TestRefusedWithoutLandlock(t *testing.T) {
	none := func() (int, error) { return 0, errors.New("the kernel is built without Landlock") }
	_, err := command(t.Context(), Policy{}, none, "/bin/sh", "-c", "true")
	var re *RefusedError
	if !errors.Is(err, ErrNoLandlock) || !errors.As(err, &re) {
		t.Fatalf("err = %v", err)
	}
	want := `shell refused: this kernel has no Landlock (the kernel is built without Landlock); set "unsandboxed": true in the config to run shells without a sandbox`
	if err.Error() != want {
		t.Errorf("error:\n got %s\nwant %s", err, want)
	}
	// Unsandboxed runs anyway: through the helper, which contains the
	// tree but applies no Landlock (directly off Linux).
	c, err := command(t.Context(), Policy{Config: Config{Unsandboxed: true}}, none, "/bin/sh", "-c", "true")
	if err != nil {
		t.Fatal(err)
	}
	if c.helper != usesHelper || !c.Status.Unsandboxed || c.Status.Warning() != "" || !strings.HasPrefix(c.Status.String(), "unsandboxed") {
		t.Errorf("path %q, status %+v", c.Path, c.Status)
	}
	if err := c.Run(); err != nil {
		t.Fatal(err)
	}
}

func TestStatus(t *testing.T) {
	deny := Policy{}
	allow := Policy{Config: Config{Network: NetworkAllow}}
	for _, tc := range []struct {
		p       Policy
		abi     int
		netBy   string
		str     string
		warning bool
	}{
		{deny, 3, DeniedByLandlock, "Landlock ABI 3; network not restricted (needs Landlock ABI 4); no resource limits", true},
		{deny, 4, DeniedByLandlock, "Landlock ABI 4; TCP denied (Landlock), UDP not restricted; no resource limits", true},
		{deny, 10, DeniedByLandlock, "Landlock ABI 10; network denied (Landlock: TCP and UDP); no resource limits", false},
		{deny, 1, DeniedBySeccomp, "Landlock ABI 1; network denied (seccomp filter and Landlock: no sockets but UNIX, netlink and refused TCP); no resource limits", false},
		{deny, 1, DeniedByNamespace, "Landlock ABI 1; network denied (own network namespace, loopback only); no resource limits", false},
		{allow, 3, DeniedByNamespace, "Landlock ABI 3; network allowed; no resource limits", false},
	} {
		s := newStatus(&tc.p, tc.abi, tc.netBy, false)
		if s.String() != tc.str || (s.Warning() != "") != tc.warning {
			t.Errorf("ABI %d %s by %s: %q, warning %q", tc.abi, tc.p.network(), tc.netBy, s, s.Warning())
		}
	}
	if w := newStatus(&deny, 1, DeniedByLandlock, false).Warning(); !strings.HasPrefix(w, "network is not restricted") {
		t.Errorf("warning %q", w)
	}
	if w := newStatus(&deny, 4, DeniedByLandlock, false).Warning(); !strings.HasPrefix(w, "UDP, ICMP and raw sockets are not restricted") {
		t.Errorf("warning %q", w)
	}
}
