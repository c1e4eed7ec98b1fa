package apitest

import (
	"context"
	"path"
	"sync"

	"google.golang.org/grpc"
)

// Calls is a connection that counts the unary calls made through it, by
// method name (GetExp, UpdateJobStatuses), and keeps their requests: a
// test hands it to a controller to see how many round trips a step costs.
type Calls struct {
	grpc.ClientConnInterface
	mu    sync.Mutex
	calls map[string]int
	reqs  map[string][]any
}

// CountCalls wraps conn.
func CountCalls(conn grpc.ClientConnInterface) *Calls {
	return &Calls{ClientConnInterface: conn, calls: map[string]int{}, reqs: map[string][]any{}}
}

// Invoke counts the call and makes it.
func (c *Calls) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.calls[path.Base(method)]++
	c.reqs[path.Base(method)] = append(c.reqs[path.Base(method)], args)
	c.mu.Unlock()
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
}

// Requests are the requests of the calls to method so far, in order.
func (c *Calls) Requests(method string) []any {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]any(nil), c.reqs[method]...)
}

// Count is how many times method was called.
func (c *Calls) Count(method string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.calls[method]
}

// Take returns the counts so far and starts again from zero.
func (c *Calls) Take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.calls
	c.calls, c.reqs = map[string]int{}, map[string][]any{}
	return out
}
