package apitest

import (
	"context"
	"path"
	"sync"

	"google.golang.org/grpc"
)

// Calls is a connection that counts the unary calls made through it, by
// method name (GetExp, UpdateJobStatuses): a test hands it to a controller
// to see how many round trips a step costs.
type Calls struct {
	grpc.ClientConnInterface
	mu    sync.Mutex
	calls map[string]int
}

// CountCalls wraps conn.
func CountCalls(conn grpc.ClientConnInterface) *Calls {
	return &Calls{ClientConnInterface: conn, calls: map[string]int{}}
}

// Invoke counts the call and makes it.
func (c *Calls) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	c.mu.Lock()
	c.calls[path.Base(method)]++
	c.mu.Unlock()
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, opts...)
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
	c.calls = map[string]int{}
	return out
}
