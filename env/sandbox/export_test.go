package sandbox

// ForceHelper makes Start run c under the helper, as Prepare does, even
// where the host could start the init shell itself.
func ForceHelper(c *Cmd) { c.nsInit = false }
