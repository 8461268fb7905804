package journal_test

import "iter"

func iterPull[K, V any](seq iter.Seq2[K, V]) (func() (K, V, bool), func()) {
	return iter.Pull2(seq)
}
