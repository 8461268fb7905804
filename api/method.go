package api

import (
	"context"
	"fmt"
	"iter"
	"reflect"
)

// Params is what every method's params type implements: Validate checks
// what the params can check on their own (sizes, enumerations, required
// fields, the idempotency key), so that what a request must satisfy
// before a host looks at its state reads in one place. It returns nil or
// an *[Error], of kind [KindInvalidParams] with the field in its data
// ({"field": "title"}, and {"limit": N} for a size) unless another kind
// is meant (a malformed cursor is [KindCursorInvalid]). What needs the
// host (whether it can use a model, where a mount leads, whether a run
// exists) is the host's to check.
type Params interface {
	Validate() error
}

// Method describes one JSON-RPC method of weft's protocol: its name,
// whether it mutates, a one-line doc, its params type P and its result
// type R, and the [Host] method that implements it. The descriptors are
// the variables of this package ([SessionCreate], [RunStart], …), listed
// by [Methods]; rpc registers its handlers from them, hosts wrap their
// mutations with idempotency by them, package client calls them, and the
// OpenRPC document (rpc.discover, `weft schema`) is generated from them.
//
// A Method is a value: copying it is cheap, and one made outside this
// package binds no Host method (its Call fails).
type Method[P Params, R any] struct {
	// Name is the wire name, noun/verb.
	Name string
	// Mutating methods take an idempotencyKey: an exact retry replays
	// the first result, the same key with other params is
	// [ErrIdempotencyConflict]. They are never cut short by a client that
	// goes away.
	Mutating bool
	// Doc says what the method does, in a sentence or two.
	Doc string

	call func(Host, context.Context, P) (*R, error)
}

// Call calls the method on h. A connection's own methods ([Initialize],
// [Discover], [EventsUnsubscribe]) are no Host's: Call returns
// [ErrConnMethod] for them.
func (m Method[P, R]) Call(ctx context.Context, h Host, p P) (*R, error) {
	if m.call == nil {
		return nil, fmt.Errorf("%s: %w", m.Name, ErrConnMethod)
	}
	return m.call(h, ctx, p)
}

// Info describes m without its type parameters.
func (m Method[P, R]) Info() MethodInfo {
	return MethodInfo{
		Name: m.Name, Doc: m.Doc, Mutating: m.Mutating, Conn: m.call == nil,
		Params: reflect.TypeFor[P](), Result: reflect.TypeFor[R](),
	}
}

// NewParams returns a new *P holding the zero params.
func (m Method[P, R]) NewParams() any { return new(P) }

// Invoke is [Method.Call] with params given as a P or a *P, and the
// result as an *R, never nil when err is nil (a nil result is the zero
// R). It is what serves a method from the table without its types
// (package rpc's registration); a params value of another type is an
// error.
func (m Method[P, R]) Invoke(ctx context.Context, h Host, params any) (any, error) {
	p, err := paramsOf[P](m.Name, params)
	if err != nil {
		return nil, err
	}
	r, err := m.Call(ctx, h, p)
	if err != nil {
		return nil, err
	}
	if r == nil {
		r = new(R)
	}
	return r, nil
}

func (Method[P, R]) descriptor() {}

// Stream describes a method whose answer goes on after its reply: the
// reply names a subscription ([SubscribeResult]), and notifications
// carry what follows, each item in an Item notification until an End
// notification closes it. A [Host] implements it as an iterator of T;
// package client turns the notifications back into that iterator.
type Stream[P Params, T any] struct {
	// Name is the wire name.
	Name string
	// Doc says what the method does.
	Doc string
	// Item is the notification that carries one T; End is the one that
	// ends the stream.
	Item, End string

	call func(Host, context.Context, P) (iter.Seq2[T, error], error)
}

// Call calls the method on h.
func (s Stream[P, T]) Call(ctx context.Context, h Host, p P) (iter.Seq2[T, error], error) {
	if s.call == nil {
		return nil, fmt.Errorf("%s: %w", s.Name, ErrConnMethod)
	}
	return s.call(h, ctx, p)
}

// Info describes s without its type parameters; its Result is
// [SubscribeResult], the reply on the wire.
func (s Stream[P, T]) Info() MethodInfo {
	return MethodInfo{
		Name: s.Name, Doc: s.Doc,
		Params: reflect.TypeFor[P](), Result: reflect.TypeFor[SubscribeResult](), Item: reflect.TypeFor[T](),
		Notifications: []string{s.Item, s.End},
	}
}

// NewParams returns a new *P holding the zero params.
func (s Stream[P, T]) NewParams() any { return new(P) }

// Invoke is [Stream.Call] with params given as a P or a *P; the result
// is the iter.Seq2[T, error].
func (s Stream[P, T]) Invoke(ctx context.Context, h Host, params any) (any, error) {
	p, err := paramsOf[P](s.Name, params)
	if err != nil {
		return nil, err
	}
	return s.Call(ctx, h, p)
}

func (Stream[P, T]) descriptor() {}

// paramsOf returns params as a P: params is a P or a non-nil *P.
func paramsOf[P any](method string, params any) (P, error) {
	switch v := params.(type) {
	case P:
		return v, nil
	case *P:
		if v != nil {
			return *v, nil
		}
	}
	var zero P
	return zero, fmt.Errorf("api: %s: params are %T, want %T", method, params, zero)
}

// ErrConnMethod is returned by Call for a method that a connection
// serves itself rather than a [Host]: initialize, rpc.discover and
// events/unsubscribe. Its kind is method_not_found: no Host has it.
var ErrConnMethod = NewError(KindMethodNotFound, "served by the connection, not by a host")

// Descriptor is one entry of the method table, a [Method] or a [Stream],
// seen without its type parameters: what code that walks the table
// (registration, schema generation, tests) works with. The set of
// implementations is closed.
type Descriptor interface {
	// Info describes the method.
	Info() MethodInfo
	// NewParams returns a pointer to new zero params, to decode into.
	NewParams() any
	// Invoke calls the method on h with params (its params type, or a
	// pointer to it): a Method's result is a non-nil pointer to its
	// result type, a Stream's its iterator.
	Invoke(ctx context.Context, h Host, params any) (any, error)

	descriptor()
}

// MethodInfo describes a method of the table.
type MethodInfo struct {
	// Name is the wire name; Doc the description.
	Name, Doc string
	// Mutating is set for methods that take an idempotencyKey.
	Mutating bool
	// Params is the params type; Result the type of the reply.
	Params, Result reflect.Type
	// Item is, for a stream, the type of what each of its notifications
	// carries to the Host's iterator; nil otherwise.
	Item reflect.Type
	// Notifications are, for a stream, the notifications that carry it:
	// its items', then its end's.
	Notifications []string
	// Conn is set for a method the connection serves itself (initialize,
	// rpc.discover, events/unsubscribe), which no [Host] implements.
	Conn bool
}

// Stream reports whether the method answers with a stream of
// notifications.
func (mi MethodInfo) Stream() bool { return mi.Item != nil }
