package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"weft.dev/weft/api"
	"weft.dev/weft/env"
	"weft.dev/weft/event"
)

type mountCmd struct {
	Session      string `arg:"" help:"The session."`
	Path         string `arg:"" optional:"" help:"The host directory to mount, PATH[:ro]; omit it with --scratch."`
	ID           string `help:"The mount ID (default: the directory's name, or scratch)." placeholder:"ID"`
	Default      bool   `help:"Make it the default mount: relative paths resolve there."`
	ShellDefault bool   `name:"shell-default" help:"Make it the mount shells start in (read-write only)."`
	Scratch      bool   `help:"Mount a private directory owned by the session instead of PATH."`
	Replace      bool   `help:"Replace the mount with the same ID."`
	Inject       bool   `help:"Tell the active run about the change, as steering."`
	JSON         bool   `name:"json" help:"Print the result as JSON."`
}

func (c *mountCmd) Run(ctx context.Context, a *app) error {
	m := event.Mount{ID: c.ID, Mode: event.ModeReadWrite, Default: c.Default, DefaultForShell: c.ShellDefault}
	switch {
	case c.Scratch && c.Path != "":
		return usageErr("mount: give PATH or --scratch, not both")
	case c.Scratch:
		m.Kind = event.KindScratch
		if m.ID == "" {
			m.ID = "scratch"
		}
	case c.Path == "":
		return usageErr("mount: give PATH or --scratch")
	default:
		path := c.Path
		if p, ok := strings.CutSuffix(path, ":ro"); ok {
			path, m.Mode = p, event.ModeReadOnly
		} else if p, ok := strings.CutSuffix(path, ":rw"); ok {
			path = p
		}
		abs, err := filepath.Abs(path)
		if err != nil {
			return usageErr("mount %s: %v", c.Path, err)
		}
		m.Kind, m.Path = event.KindLocal, abs
		if m.ID == "" {
			m.ID = strings.Trim(slugRe().ReplaceAllString(strings.ToLower(filepath.Base(abs)), "-"), "-_")
			if m.ID == "" {
				m.ID = "mount"
			}
		}
	}
	r, err := hostCall(ctx, a, "weft", api.EnvMount, api.MountParams{SessionID: c.Session, Mount: m, Replace: c.Replace, InjectContext: c.Inject})
	if err != nil {
		return withFlags("mount", err)
	}
	if c.JSON {
		return printJSON(a, r)
	}
	fmt.Fprintf(a.stdout, "mounted %s at %s/%s (%s), binding version %d\n", r.MountID, env.Prefix, r.MountID, r.Mount.Mode, r.BindingVersion)
	printWarnings(a, r.Warnings)
	return nil
}

type unmountCmd struct {
	Session         string `arg:"" help:"The session."`
	ID              string `arg:"" help:"The mount to detach."`
	NewDefault      string `name:"new-default" help:"The new default mount; required when detaching the default." placeholder:"ID"`
	NewShellDefault string `name:"new-shell-default" help:"The new shell mount (read-write)." placeholder:"ID"`
	Inject          bool   `help:"Tell the active run about the change, as steering."`
	JSON            bool   `name:"json" help:"Print the result as JSON."`
}

func (c *unmountCmd) Run(ctx context.Context, a *app) error {
	r, err := hostCall(ctx, a, "weft", api.EnvUnmount, api.UnmountParams{SessionID: c.Session, MountID: c.ID, NewDefaultMountID: c.NewDefault,
		NewDefaultShellMountID: c.NewShellDefault, InjectContext: c.Inject})
	if err != nil {
		return withFlags("unmount", err)
	}
	if c.JSON {
		return printJSON(a, r)
	}
	fmt.Fprintf(a.stdout, "unmounted %s, binding version %d, default %s\n", r.MountID, r.BindingVersion, r.CurrentDefaultMountID)
	printWarnings(a, r.Warnings)
	return nil
}

type mountsCmd struct {
	Session string `arg:"" help:"The session."`
	JSON    bool   `name:"json" help:"Print the binding as JSON."`
}

func (c *mountsCmd) Run(ctx context.Context, a *app) error {
	r, err := hostCall(ctx, a, "weft", api.EnvList, api.ListEnvParams{SessionID: c.Session})
	if err != nil {
		return err
	}
	if c.JSON {
		return printJSON(a, r)
	}
	fmt.Fprintf(a.stdout, "binding version %d (seq %d)\n", r.BindingVersion, r.LatestEnvironmentCursor)
	tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tMODE\tKIND\tFLAGS\tPATH")
	for _, m := range r.Mounts {
		var flags []string
		if m.Default {
			flags = append(flags, "default")
		}
		if m.DefaultForShell {
			flags = append(flags, "shell")
		}
		if len(flags) == 0 {
			flags = []string{"-"}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", m.ID, m.Mode, m.Kind, strings.Join(flags, ","), m.Path)
	}
	return tw.Flush()
}

func printWarnings(a *app, ws []api.Warning) {
	for _, w := range ws {
		fmt.Fprintf(a.stderr, "weft: warning: %s: %s\n", w.Code, w.Message)
	}
}
