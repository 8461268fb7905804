package agent

import (
	"weft.dev/weft/env"
)

func (l *loop) binding() *env.Binding {
	if l.run.Env == nil {
		return nil
	}
	return l.run.Env()
}
