package journal

// Running reports whether j's writer goroutine runs (see Journal.Park).
func Running(j *Journal) bool {
	j.run.Lock()
	defer j.run.Unlock()
	return j.run.running
}
