package main

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

// mcpCmd shows the MCP servers of the config file.
type mcpCmd struct {
	List  mcpListCmd  `cmd:"" help:"List the MCP servers of the config file."`
	Tools mcpToolsCmd `cmd:"" help:"Start an MCP server of the config file and list its tools as the model sees them."`
}

type mcpListCmd struct {
	JSON bool `name:"json" help:"Print the servers as JSON, as the config file holds them."`
}

func (c *mcpListCmd) Run(a *app) error {
	f, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	if c.JSON {
		if f.MCPServers == nil {
			f.MCPServers = map[string]event.MCPServer{}
		}
		return printJSON(a, f.MCPServers)
	}
	if len(f.MCPServers) == 0 {
		fmt.Fprintln(a.stdout, "no MCP servers: add them under \"mcpServers\" in the config file (docs/config.md)")
		return nil
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NAME\tTRANSPORT\tRUNS\tTARGET")
	for _, name := range sortedNames(f.MCPServers) {
		s := f.MCPServers[name]
		transport, runs, target := "http", "-", s.URL
		if s.Command != "" {
			transport, target = "stdio", strings.Join(append([]string{s.Command}, s.Args...), " ")
			runs = "sandboxed"
			if s.Trusted {
				runs = "trusted"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, transport, runs, target)
	}
	return tw.Flush()
}

type mcpToolsCmd struct {
	Server string `arg:"" help:"The server's name in the config file."`
	JSON   bool   `name:"json" help:"Print the tools (name, description, input schema) and those left out as JSON."`
}

// Run starts the server here, confined to the working directory mounted
// read-write as a run's would be, lists its tools and stops it.
func (c *mcpToolsCmd) Run(ctx context.Context, a *app) error {
	f, _, err := a.loadConfig()
	if err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	// Only listing: the server need not take its time to exit.
	m, err := a.newMCP(f, log, 200*time.Millisecond)
	if err != nil {
		return err
	}
	defer m.Close()
	mounts, err := parseMounts(nil)
	if err != nil {
		return err
	}
	b, err := env.NewBinding(1, mounts)
	if err != nil {
		return err
	}
	defer b.Close()
	l, err := m.Inspect(ctx, c.Server, b)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(a, l)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TOOL\tDESCRIPTION")
	for _, t := range l.Tools {
		desc, _, _ := strings.Cut(t.Description, "\n")
		fmt.Fprintf(tw, "%s\t%s\n", t.Name, clip(desc, 100))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, s := range l.Skipped {
		fmt.Fprintf(a.stdout, "left out: %s: %s\n", s.Tool, s.Reason)
	}
	return nil
}

func sortedNames[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
