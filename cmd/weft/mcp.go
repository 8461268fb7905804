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

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
	"weft.dev/weft/tool/mcp"
)

// mcpCmd shows the MCP servers of the config file.
type mcpCmd struct {
	List      mcpListCmd      `cmd:"" help:"List the MCP servers of the config file."`
	Tools     mcpToolsCmd     `cmd:"" help:"Start an MCP server of the config file and list its tools as the model sees them."`
	Resources mcpResourcesCmd `cmd:"" help:"List the resources of the config file's MCP servers, or print one."`
	Prompts   mcpPromptsCmd   `cmd:"" help:"List the prompts of the config file's MCP servers, or print one with its arguments filled in."`
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

// localMCP starts an MCP client of the config file's servers in this
// process, with the working directory mounted read-write as a run's
// would be; the caller closes both.
func (a *app) localMCP() (*mcp.Manager, *env.Binding, error) {
	f, _, err := a.loadConfig()
	if err != nil {
		return nil, nil, err
	}
	log := slog.New(slog.NewTextHandler(a.stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	m, err := a.newMCP(f, log, 200*time.Millisecond)
	if err != nil {
		return nil, nil, err
	}
	mounts, err := parseMounts(nil)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	b, err := env.NewBinding(1, mounts)
	if err != nil {
		m.Close()
		return nil, nil, err
	}
	return m, b, nil
}

type mcpResourcesCmd struct {
	Server string `arg:"" optional:"" help:"Only this server's resources (default: every server's)."`
	URI    string `arg:"" optional:"" help:"Print this resource: its text, or what its binary data is."`
	JSON   bool   `name:"json" help:"Print the list, or the resource's contents, as JSON (mcp/resources, mcp/read_resource)."`
}

// Run lists the resources of the servers (starting them here), or reads
// one.
func (c *mcpResourcesCmd) Run(ctx context.Context, a *app) error {
	m, b, err := a.localMCP()
	if err != nil {
		return err
	}
	defer m.Close()
	defer b.Close()
	if c.URI != "" {
		res, err := m.ReadResource(ctx, c.Server, c.URI, nil, b)
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(a, res)
		}
		for _, ct := range res.Contents {
			if ct.Blob != nil {
				fmt.Fprintf(a.stdout, "[%s: %s, %d bytes of binary data]\n", ct.URI, orType(ct.MIMEType), len(ct.Blob))
				continue
			}
			fmt.Fprint(a.stdout, ct.Text)
			if !strings.HasSuffix(ct.Text, "\n") {
				fmt.Fprintln(a.stdout)
			}
		}
		return nil
	}
	res, err := m.Resources(ctx, c.Server, nil, b)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(a, res)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tURI\tTYPE\tNAME")
	for _, r := range res.Resources {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Server, r.URI, orType(r.MIMEType), clip(r.Name, 60))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return mcpFailures(a, res.Failed, res.Truncated)
}

type mcpPromptsCmd struct {
	Server string   `arg:"" optional:"" help:"Only this server's prompts (default: every server's)."`
	Name   string   `arg:"" optional:"" help:"Print this prompt with its arguments filled in."`
	Arg    []string `short:"a" help:"An argument of the prompt, NAME=VALUE. Repeatable." placeholder:"NAME=VALUE"`
	JSON   bool     `name:"json" help:"Print the list, or the prompt's messages, as JSON (mcp/prompts, mcp/get_prompt)."`
}

// Run lists the prompts of the servers (starting them here), or gets
// one.
func (c *mcpPromptsCmd) Run(ctx context.Context, a *app) error {
	args := map[string]string{}
	for _, kv := range c.Arg {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return usageErr("--arg %q: want NAME=VALUE", kv)
		}
		args[k] = v
	}
	if len(args) > 0 && c.Name == "" {
		return usageErr("--arg fills in a prompt: name it (weft mcp prompts SERVER NAME --arg K=V)")
	}
	m, b, err := a.localMCP()
	if err != nil {
		return err
	}
	defer m.Close()
	defer b.Close()
	if c.Name != "" {
		res, err := m.GetPrompt(ctx, c.Server, c.Name, args, nil, b)
		if err != nil {
			return err
		}
		if c.JSON {
			return printJSON(a, res)
		}
		for _, msg := range res.Messages {
			fmt.Fprintf(a.stdout, "%s: %s%s\n", msg.Role, event.Text(msg.Content), imagesNote(msg.Content))
		}
		return nil
	}
	res, err := m.Prompts(ctx, c.Server, nil, b)
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(a, res)
	}
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SERVER\tPROMPT\tARGUMENTS\tDESCRIPTION")
	for _, p := range res.Prompts {
		var names []string
		for _, arg := range p.Arguments {
			n := arg.Name
			if !arg.Required {
				n += "?"
			}
			names = append(names, n)
		}
		desc, _, _ := strings.Cut(p.Description, "\n")
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", p.Server, p.Name, strings.Join(names, ","), clip(desc, 80))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return mcpFailures(a, res.Failed, res.Truncated)
}

// mcpFailures names the servers a list could not ask, or cut.
func mcpFailures(a *app, failed []api.MCPServerFailure, truncated []string) error {
	for _, f := range failed {
		fmt.Fprintf(a.stderr, "weft: mcp server %q: %s\n", f.Server, f.Error)
	}
	for _, s := range truncated {
		fmt.Fprintf(a.stderr, "weft: mcp server %q: the list was cut at %d items\n", s, api.MaxMCPListItems)
	}
	return nil
}

func orType(mime string) string {
	if mime == "" {
		return "-"
	}
	return mime
}

func sortedNames[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
