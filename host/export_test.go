package host

// Loaded reports whether h has session id loaded.
func Loaded(h *Host, id string) bool { return h.loaded(id) != nil }
