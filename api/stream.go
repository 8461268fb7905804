package api

import "context"

// A PageGate admits the pages a host's stream reads from its store (a
// subscription's replay, a process follow's output), so that a transport
// serving many streams can bound what all of them hold together: a page
// is only known once read, and hundreds of streams, each reading a page,
// would otherwise hold hundreds of pages. A stream made with a ctx that
// carries a gate ([WithPageGate]) calls StartRead before each page it
// reads and, if that succeeded, EndRead after it with the page's cost (0
// when the read failed), before the page is yielded: for events, their
// data plus a fixed overhead each; for output, the sum of [Chunk.Cost].
// Either may wait; an error from either ends the stream with that error.
// Both are called from the goroutine that pulls the stream. The gate
// belongs to the transport, which gives a page's cost back once it has
// written it.
type PageGate interface {
	StartRead(ctx context.Context) error
	EndRead(ctx context.Context, cost int) error
}

type pageGateKey struct{}

// WithPageGate returns ctx carrying g for the streams a [Host] makes with
// it ([Host.Subscribe], [Host.FollowProcess]). A host that does not bound
// its reads ignores it.
func WithPageGate(ctx context.Context, g PageGate) context.Context {
	return context.WithValue(ctx, pageGateKey{}, g)
}

// PageGateFrom returns the gate ctx carries, or nil.
func PageGateFrom(ctx context.Context) PageGate {
	g, _ := ctx.Value(pageGateKey{}).(PageGate)
	return g
}

// Cost is what c counts against a [PageGate]: its data as base64 in JSON,
// and the fields around it.
func (c Chunk) Cost() int { return (len(c.Data)+2)/3*4 + 128 }
