package api

import (
	"strings"

	"weft.dev/weft/event"
)

// checkBudget refuses a budget with a negative or non-finite limit or an
// unknown policy, naming the field (field.costUsd).
func checkBudget(field string, b *event.Budget) error {
	if b == nil {
		return nil
	}
	err := b.Check(field)
	if err == nil {
		return nil
	}
	name, _, _ := strings.Cut(err.Error(), " ")
	return Errorf(KindInvalidParams, "%v", err).With("field", name)
}
