package main

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"

	"weft.dev/weft/host"
	"weft.dev/weft/internal/config"
	"weft.dev/weft/process"
	"weft.dev/weft/store/sqlite"
	"weft.dev/weft/tool"
	"weft.dev/weft/tool/builtin"
)

// hostKind says how a host uses the store.
type hostKind int

const (
	// serving: `weft serve` and `weft rpc`, the store's one host, which
	// recovers what a crash left.
	serving hostKind = iota
	// local: a one-shot `weft run` in this process, which shares the store
	// with other one-shot runs and opens only its own session.
	local
)

// newHost builds a host over the SQLite store, with the built-in tools,
// background processes and the configured models.
func (a *app) newHost(ctx context.Context, log *slog.Logger, kind hostKind) (*host.Host, *sqlite.Store, *tool.Registry, error) {
	cfgFile, cfgPath, err := a.loadConfig()
	if err != nil {
		return nil, nil, nil, err
	}
	st, storePath, err := a.openStore(ctx, cfgFile)
	if err != nil {
		return nil, nil, nil, err
	}
	procs, err := process.New(process.Config{Store: st, Logger: log, BaseEnv: os.Environ(), Sandbox: cfgFile.Sandbox()})
	if err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	reg := tool.NewRegistry()
	if err := builtin.Register(reg, builtin.Options{Sandbox: cfgFile.Sandbox(), Background: process.BackgroundShell{}}); err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	if err := process.RegisterTools(reg, procs); err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	state, err := a.stateDir()
	if err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	h, err := host.New(ctx, host.Config{
		Store: st, Tools: reg, DefaultModel: a.defaultModel(cfgFile), MaxSteps: cfgFile.MaxSteps,
		LockDir: lockDir(storePath), ScratchDir: filepath.Join(state, "scratch"), Logger: log, Processes: procs,
		Shared: kind == local,
		ResolveModel: func(name string) (*host.Model, error) {
			m, err := config.Resolve(name, cfgFile, cfgPath, a.getenv)
			if err != nil {
				return nil, err
			}
			return &host.Model{Name: m.Name, Provider: m.Provider, Model: m.Model, MaxTokens: m.MaxTokens}, nil
		},
	})
	if err != nil {
		st.Close()
		return nil, nil, nil, err
	}
	return h, st, reg, nil
}

// defaultModel is WEFT_MODEL or the config file's default model.
func (a *app) defaultModel(f config.File) string {
	if m := a.getenv("WEFT_MODEL"); m != "" {
		return m
	}
	return f.DefaultModel
}
