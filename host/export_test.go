package host

import (
	"context"

	"weft.dev/weft/process"
	"weft.dev/weft/tool"
)

// Loaded reports whether h has session id loaded.
func Loaded(h *Host, id string) bool { return h.loaded(id) != nil }

// RunTool runs a tool process through the hooks h gives its process manager.
func RunTool(h *Host, ctx context.Context, run process.ToolRun) tool.Result {
	return processHooks{h}.RunTool(ctx, run)
}

// TranscriptBytes returns the memory h's sessions keep their transcripts in.
func TranscriptBytes(h *Host) int64 { return h.scfg.Transcripts.Used() }

// Released returns how many times h gave memory back to the operating
// system (Config.MemoryIdle).
func Released(h *Host) int64 { return h.released.Load() }
