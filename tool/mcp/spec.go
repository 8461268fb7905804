package mcp

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"path/filepath"
	"slices"
	"strings"

	"weft.dev/weft/event"
)

// Origin says where a server's configuration comes from, which decides
// what it may do.
type Origin int

const (
	// FromConfig is the host's configuration file: written by the user
	// who runs weft, so it may mark a server trusted and name any
	// environment variable.
	FromConfig Origin = iota
	// FromSession is a session's own configuration (session/create),
	// stored in the session's log: it may not be trusted, may name only
	// the variables the host allows, and may hold no literal credential.
	FromSession
)

func (o Origin) String() string {
	if o == FromSession {
		return "session"
	}
	return "config"
}

// maxServerName bounds a server's name, so that mcp__<server>__<tool>
// leaves room for the tool's within the 64 characters providers accept.
const maxServerName = 24

// CheckName reports whether name can name a server: 1 to 24 of
// [a-zA-Z0-9_-], beginning with a letter or digit, without "__" (which
// separates the server from the tool in mcp__<server>__<tool>).
func CheckName(name string) error {
	if name == "" || len(name) > maxServerName {
		return fmt.Errorf("server name %q: want 1 to %d characters", name, maxServerName)
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (i > 0 && (c == '_' || c == '-'))
		if !ok {
			return fmt.Errorf("server name %q: use letters, digits, _ and - (not first)", name)
		}
	}
	if strings.Contains(name, "__") {
		return fmt.Errorf("server name %q: \"__\" separates the server from the tool in mcp__<server>__<tool>", name)
	}
	return nil
}

// FieldError is an error of one field of a server's configuration. Field
// is the path below the server, e.g. "headers.Authorization".
type FieldError struct {
	Server string
	Field  string
	Msg    string
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("mcpServers.%s: %s", e.Server, e.Msg)
	}
	return fmt.Sprintf("mcpServers.%s.%s: %s", e.Server, e.Field, e.Msg)
}

// Check validates one server's configuration for its origin. allowEnv
// names the host variables a session's server may reference (ignored
// for FromConfig). Errors are [*FieldError]s naming the field.
func Check(name string, s event.MCPServer, origin Origin, allowEnv []string) error {
	if err := CheckName(name); err != nil {
		return &FieldError{Server: name, Msg: err.Error()}
	}
	bad := func(field, format string, args ...any) error {
		return &FieldError{Server: name, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
	switch {
	case s.Command == "" && s.URL == "":
		return bad("", "set command (a stdio server) or url (a streamable HTTP server)")
	case s.Command != "" && s.URL != "":
		return bad("", "set command or url, not both")
	}
	if s.Command != "" {
		if len(s.Headers) > 0 {
			return bad("headers", "headers are for url servers; a command gets env")
		}
		if strings.ContainsRune(s.Command, 0) {
			return bad("command", "holds a NUL byte")
		}
		for i, a := range s.Args {
			if strings.ContainsRune(a, 0) {
				return bad(fmt.Sprintf("args[%d]", i), "holds a NUL byte")
			}
		}
		if strings.ContainsRune(s.Cwd, 0) {
			return bad("cwd", "holds a NUL byte")
		}
		for i, p := range s.ReadOnly {
			if !filepath.IsAbs(p) {
				return bad(fmt.Sprintf("readOnly[%d]", i), "%q is not an absolute path", p)
			}
		}
		for _, k := range sortedKeys(s.Env) {
			if k == "" || strings.ContainsAny(k, "=\x00") {
				return bad("env", "%q is not a variable name", k)
			}
			if err := checkValue(s.Env[k], k, origin, allowEnv); err != nil {
				return bad("env."+k, "%s", err)
			}
		}
		if s.Trusted && origin == FromSession {
			return bad("trusted", "only the host's configuration may trust a server; a session's servers run in the sandbox")
		}
		return nil
	}
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return bad("url", "%q: want an http:// or https:// URL", s.URL)
	}
	if u.User != nil {
		return bad("url", "holds a user and password; send a token in a header instead, as ${VAR}")
	}
	if origin == FromSession {
		for k := range u.Query() {
			if secretKey(k) {
				return bad("url", "its query parameter %q looks like a credential, and a session's configuration is stored in its log: send it in a header as ${VAR}", k)
			}
		}
	}
	if len(s.Args) > 0 || len(s.Env) > 0 || s.Cwd != "" || len(s.ReadOnly) > 0 {
		return bad("", "args, env, cwd and readOnly are for command servers")
	}
	if s.Trusted {
		return bad("trusted", "trusted is for command servers (an HTTP server runs elsewhere)")
	}
	for _, k := range sortedKeys(s.Headers) {
		if !validHeaderName(k) {
			return bad("headers", "%q is not a header name", k)
		}
		if strings.ContainsAny(s.Headers[k], "\r\n\x00") {
			return bad("headers."+k, "holds a line break or NUL")
		}
		if err := checkValue(s.Headers[k], k, origin, allowEnv); err != nil {
			return bad("headers."+k, "%s", err)
		}
	}
	return nil
}

// checkValue checks the ${VAR} references of a value, and that a
// session's value of a credential-looking key is not a literal.
func checkValue(v, key string, origin Origin, allowEnv []string) error {
	refs, err := references(v)
	if err != nil {
		return err
	}
	if origin != FromSession {
		return nil
	}
	for _, r := range refs {
		if !slices.Contains(allowEnv, r) {
			return fmt.Errorf("${%s}: the host's configuration does not let sessions use this variable (add it to mcpSessionEnv)", r)
		}
	}
	if len(refs) == 0 && v != "" && secretKey(key) {
		return errors.New("looks like a credential, and a session's configuration is stored in its log: put it in an environment variable of the host and write ${VAR}")
	}
	return nil
}

// secretKey reports whether a header or variable name usually carries a
// credential.
func secretKey(k string) bool {
	k = strings.ToUpper(k)
	switch k {
	case "AUTHORIZATION", "PROXY-AUTHORIZATION", "COOKIE":
		return true
	}
	for _, w := range []string{"TOKEN", "KEY", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "AUTH"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// references returns the variables ${VAR} in v names. A "$" not followed
// by "{" is literal.
func references(v string) ([]string, error) {
	var out []string
	for {
		i := strings.Index(v, "${")
		if i < 0 {
			return out, nil
		}
		j := strings.IndexByte(v[i:], '}')
		if j < 0 {
			return nil, fmt.Errorf("%q: ${ without }", v)
		}
		name := v[i+2 : i+j]
		if !validVar(name) {
			return nil, fmt.Errorf("${%s}: not a variable name", name)
		}
		out = append(out, name)
		v = v[i+j+1:]
	}
}

// expand replaces every ${VAR} in v with lookup(VAR); an unset variable
// is an error naming it.
func expand(v string, lookup func(string) (string, bool)) (string, error) {
	if !strings.Contains(v, "${") {
		return v, nil
	}
	var b strings.Builder
	for {
		i := strings.Index(v, "${")
		if i < 0 {
			b.WriteString(v)
			return b.String(), nil
		}
		j := strings.IndexByte(v[i:], '}')
		if j < 0 {
			return "", fmt.Errorf("%q: ${ without }", v)
		}
		name := v[i+2 : i+j]
		val, ok := "", false
		if lookup != nil && validVar(name) {
			val, ok = lookup(name)
		}
		if !ok {
			return "", fmt.Errorf("${%s} is not set in weft's environment", name)
		}
		b.WriteString(v[:i])
		b.WriteString(val)
		v = v[i+j+1:]
	}
}

func validVar(name string) bool {
	if name == "" {
		return false
	}
	for i, c := range name {
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || (i > 0 && c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

func validHeaderName(k string) bool {
	if k == "" {
		return false
	}
	for _, c := range k {
		if c > 0x7e || c <= ' ' || strings.ContainsRune("\"(),/:;<=>?@[\\]{}", c) {
			return false
		}
	}
	return true
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

// ToolName is the name the model sees for tool of server: mcp__, the
// server, __, and the tool's name with every character providers do not
// accept replaced by _, cut to 64 characters (with a digest of the
// original name when it had to be cut).
func ToolName(server, tool string) string {
	var b strings.Builder
	b.WriteString("mcp__" + server + "__")
	for _, c := range tool {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	n := b.String()
	if len(n) <= 64 {
		return n
	}
	sum := sha256.Sum256([]byte(tool))
	return n[:64-9] + "_" + hex.EncodeToString(sum[:4])
}

// fingerprint is a digest of what makes two servers the same: the same
// name and configuration, and for a sandboxed command the same
// confinement and working directory.
func fingerprint(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		b = fmt.Appendf(nil, "%#v", v) // plain data always encodes; never panic
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}
