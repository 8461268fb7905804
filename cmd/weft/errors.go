package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"

	"weft.dev/weft/api"
)

// errNoHost reports that no host answered.
var errNoHost = errors.New("no weft host")

// hintLocal is what to do without a host, for the commands that can
// run without one.
const hintLocal = "start `weft serve`, or run without a host (weft run --local)"

// innermost is the last error of err's chain.
func innermost(err error) error {
	for {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
}

// flagNames maps the protocol's names for what a command's flags set to
// the flags, per command, so that an error names what the user typed.
var flagNames = map[string][][2]string{
	"run": {
		{"busy: queue", "--busy queue"},
		{"busy queue", "--busy queue"},
		{"busy=queue", "--busy queue"},
		{"maxSteps", "--max-steps"},
	},
	"mount": {
		{"replace: true", "--replace"},
		{"replace=true", "--replace"},
		{"pass replace", "pass --replace"},
		{"defaultForShell", "--shell-default"},
		{"injectContext", "--inject"},
	},
	"unmount": {
		{"newDefaultShellMountId", "--new-shell-default"},
		{"newDefaultMountId", "--new-default"},
		{"injectContext", "--inject"},
	},
	"approve": {{"allow_session", "--session"}},
	"deny":    {{"message", "-m"}},
}

// dupFlagRe matches "--x, or --x" left by a message that named both the
// flag and the field.
// dupFlagRe is compiled on first use, not at start: most commands never need it.
var dupFlagRe = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(--[a-z-]+(?: [a-z]+)?), or (?:pass )?(--[a-z-]+(?: [a-z]+)?)`)
})

// withFlags rewrites the protocol's field names in err's message to the
// flags of command cmd. Errors other than the host's are returned as they
// are.
func withFlags(cmd string, err error) error {
	var ae *api.Error
	if err == nil || !errors.As(err, &ae) {
		return err
	}
	msg := ae.Message
	for _, p := range flagNames[cmd] {
		msg = strings.ReplaceAll(msg, p[0], p[1])
	}
	msg = dupFlagRe().ReplaceAllStringFunc(msg, func(s string) string {
		m := dupFlagRe().FindStringSubmatch(s)
		if m[1] == m[2] {
			return m[1]
		}
		return s
	})
	if msg == ae.Message {
		return err
	}
	c := *ae
	c.Message = msg
	return &c
}

// missingEnv is the variable a model's missing API key is read from, as
// the host's error names it in data.env; "" for any other error.
func missingEnv(err error) string {
	var ae *api.Error
	if !errors.As(err, &ae) {
		return ""
	}
	env, _ := ae.Data["env"].(string)
	if !envNameRe().MatchString(env) {
		return ""
	}
	return env
}

// missingModel is the model of a missing API key's error, as the host
// names it in data.model.
func missingModel(err error) string {
	var ae *api.Error
	if errors.As(err, &ae) {
		if m, _ := ae.Data["model"].(string); m != "" {
			return "model " + m
		}
	}
	return "the model"
}

// envNameRe matches the name of an environment variable: what a host
// names in data.env is printed in a command line, so nothing else is.
// envNameRe is compiled on first use, not at start: most commands never need it.
var envNameRe = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,127}$`) })

// hostModelError turns a refusal of a model whose API key is missing
// into what to do, in one line: for a `weft serve`, the key must be in
// the host's environment, not the client's; in this process, in this
// shell's. Other errors are returned as they are.
func (a *app) hostModelError(c *conn, err error) error {
	env := missingEnv(err)
	if env == "" {
		return err
	}
	if c == nil || !c.remote {
		return fmt.Errorf("%s: no API key: set %s in this shell (export %s=…)", missingModel(err), env, env)
	}
	where := "at " + a.hostAddr()
	if dir := a.hostDir(); dir != "" {
		where = "(started in " + dir + ")"
	}
	hint := ""
	if a.getenv(env) != "" {
		hint = " (this shell has it; the host does not see this shell's environment)"
	}
	return fmt.Errorf("the host %s lacks %s%s: restart `weft serve` with it (%s=… weft serve)", where, env, hint, env)
}

// hostDir is the working directory of the host this command talks to:
// what the host said in initialize, else, for a host that does not say,
// as far as this process can tell (the pid in the store's host lock, on
// the same machine and user); "" when it cannot.
func (a *app) hostDir() string {
	if s := a.server.Load(); s != nil && s.Cwd != "" {
		return s.Cwd
	}
	cfg, _, err := a.loadConfig()
	if err != nil {
		return ""
	}
	loc, err := a.storeLocation(cfg)
	if err != nil {
		return ""
	}
	locks := lockDir(loc)
	if locks == "" {
		return ""
	}
	b, err := os.ReadFile(filepath.Join(locks, "host.lock"))
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		return ""
	}
	dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return ""
	}
	return dir
}

// serveAddrFlags are flags people try for the address `weft serve`
// listens on, which is --listen.
var serveAddrFlags = []string{"--addr", "--address", "--port", "--bind"}

// flagHint adds what to type to a parse error of args: an unknown flag
// for the address of `weft serve` names --listen (kong's own suggestion
// for --port, the clients' --host, would be wrong there).
func flagHint(args []string, err error) error {
	if !slices.Contains(args, "serve") {
		return err
	}
	msg := err.Error()
	for _, f := range serveAddrFlags {
		if strings.HasPrefix(msg, "unknown flag "+f+",") || msg == "unknown flag "+f || strings.HasPrefix(msg, "unknown flag "+f+" ") {
			return fmt.Errorf("unknown flag %s: weft serve listens on --listen HOST:PORT (e.g. --listen 127.0.0.1:7879); clients find it by themselves, or with --host HOST:PORT", f)
		}
	}
	return err
}
