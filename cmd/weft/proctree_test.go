package main

import (
	"strings"
	"testing"

	"weft.dev/weft/event"
	"weft.dev/weft/store/record"
)

func TestProcessAndSessionTrees(t *testing.T) {
	agent := func(id, sid, child string) record.Process {
		return record.Process{ID: id, SessionID: sid, Kind: record.ProcessAgent, Spec: record.ProcessSpec{Agent: &record.AgentSpec{SessionID: child}}}
	}
	shell := func(id, sid string) record.Process {
		return record.Process{ID: id, SessionID: sid, Kind: record.ProcessShell, Spec: record.ProcessSpec{Command: "ls"}}
	}
	ps := []record.Process{shell("p0", "top"), agent("a1", "top", "c1"), shell("p1", "c1"), agent("a2", "c1", "c2"), shell("p2", "c2"), agent("a3", "top", "c3")}
	var got []string
	for _, r := range processTree(ps) {
		got = append(got, r.indent+r.p.ID)
	}
	want := "p0|a1|├─ p1|└─ a2|   └─ p2|a3"
	if strings.Join(got, "|") != want {
		t.Fatalf("process tree %q, want %q", strings.Join(got, "|"), want)
	}
	ss := []record.Session{{ID: "c2", Parent: &event.SessionParent{SessionID: "c1"}}, {ID: "c3", Parent: &event.SessionParent{SessionID: "top"}},
		{ID: "c1", Parent: &event.SessionParent{SessionID: "top"}}, {ID: "top"}, {ID: "orphan", Parent: &event.SessionParent{SessionID: "gone"}}}
	got = nil
	for _, r := range sessionTree(ss) {
		got = append(got, r.indent+r.s.ID)
	}
	want = "top|├─ c3|└─ c1|   └─ c2|orphan"
	if strings.Join(got, "|") != want {
		t.Fatalf("session tree %q, want %q", strings.Join(got, "|"), want)
	}
}
