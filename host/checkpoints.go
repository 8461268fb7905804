package host

import (
	"context"
	"encoding/json"
	"log/slog"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/host/internal/checkpoint"
)

// checkpoint is the session's checkpoint hook (agent.Run.Checkpoint):
// before a step's calls run it makes sure the read-write mounts they may
// write have a baseline, and after them it records what changed as
// checkpoint.recorded, one event per mount that changed. Which mounts it
// looks at, and how:
//
//   - write_file and edit_file: the mounts of their paths, and only those
//     paths and their directories (a write through a link: the mount, all
//     of it);
//   - shell and start_tool: every read-write mount, walked whole; a
//     background process they start makes every later step walk them too,
//     so that what it writes later is recorded at the next step boundary;
//   - every other tool (reads, MCP tools, process tools): nothing, and a
//     step of them costs nothing.
func (h *Host) checkpoint(ctx context.Context, sid string, b *env.Binding, calls []event.ToolCall) func(context.Context) []event.Event {
	if h.ckpt == nil || b == nil {
		return nil
	}
	type target struct {
		m     event.Mount
		t     *checkpoint.Tracker
		paths []string
		wide  bool
	}
	var targets []*target
	byID := map[string]*target{}
	for _, m := range b.Mounts() {
		if m.Mode != event.ModeReadWrite {
			continue
		}
		root, ok := b.RealPath(m.ID)
		if !ok {
			continue
		}
		m.Path = root
		tg := &target{m: m, t: h.ckpt.Tracker(sid, m.ID, root)}
		tg.wide = tg.t.Wide()
		byID[m.ID] = tg
	}
	wide := false
	for _, c := range calls {
		switch c.Name {
		case "write_file", "edit_file":
			var a struct {
				Path string `json:"path"`
			}
			if json.Unmarshal([]byte(c.Arguments), &a) != nil || a.Path == "" {
				continue
			}
			p, err := b.Resolve(a.Path, env.Read)
			if err != nil {
				continue
			}
			if tg := byID[p.MountID()]; tg != nil {
				tg.paths = append(tg.paths, p.Rel())
			}
		case "shell", "start_tool":
			wide = true
			var a struct {
				Background bool `json:"background"`
			}
			if c.Name == "start_tool" || json.Unmarshal([]byte(c.Arguments), &a) == nil && a.Background {
				for _, tg := range byID {
					tg.t.SetWide()
				}
			}
		}
	}
	for _, m := range b.Mounts() {
		tg := byID[m.ID]
		if tg == nil {
			continue
		}
		tg.wide = tg.wide || wide
		if tg.wide || len(tg.paths) > 0 {
			targets = append(targets, tg)
		}
	}
	if len(targets) == 0 {
		return nil
	}
	for _, tg := range targets {
		if err := tg.t.Baseline(); err != nil {
			h.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "checkpoint baseline", slog.String("session", sid), slog.String("mount", tg.m.ID), slog.Any("error", err))
		}
	}
	return func(ctx context.Context) []event.Event {
		var evs []event.Event
		for _, tg := range targets {
			var res checkpoint.Result
			var err error
			walk := tg.wide
			if !walk {
				res, walk, err = tg.t.ScanPaths(tg.paths)
			}
			if walk && err == nil {
				res, err = tg.t.Scan()
			}
			if err != nil {
				res.Incomplete = err.Error()
			}
			if len(res.Changes) == 0 && res.Incomplete == "" {
				continue
			}
			e, err := event.New("", event.CheckpointRecorded, event.CheckpointData{
				MountID: tg.m.ID, Path: tg.m.Path, Changes: res.Changes, Incomplete: res.Incomplete})
			if err != nil {
				continue
			}
			evs = append(evs, e)
		}
		return evs
	}
}
