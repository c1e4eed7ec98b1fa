package analysis

import "google.golang.org/grpc"

// grpcConn is what the controller needs of its connection.
type grpcConn = grpc.ClientConnInterface
