package memory_test

import (
	"testing"

	"go.uber.org/goleak"

	"weft.dev/weft/store"
	"weft.dev/weft/store/memory"
	"weft.dev/weft/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		s := memory.New()
		t.Cleanup(func() { s.Close() })
		return s
	})
}
