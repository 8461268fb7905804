package host_test

import (
	"time"

	"weft.dev/weft/internal/journal"
)

func journalFast() journal.Config { return journal.Config{CoalesceWindow: 2 * time.Millisecond} }
