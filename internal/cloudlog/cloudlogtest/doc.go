// Package cloudlogtest is a Cloud Logging server for tests: a real
// google.logging.v2.LoggingServiceV2 gRPC server on a loopback port, to
// which the real Go client connects with ClientOptions. The client
// library's own fake is internal to it and cannot be imported.
//
// It serves ListLogEntries (filter, order_by, page_size, page tokens) and
// TailLogEntries (entries appended after the session opened) over entries a
// test appends, built with Workload.Entry as GKE writes them for a
// k8s_container. Its filter evaluator understands exactly the filters Falcon
// sends and refuses anything else with InvalidArgument, so a filter that
// Cloud Logging would misread fails a test instead of passing. Fail injects
// gRPC errors; OnList and OnTail let a test act at the seam between a
// listing and a tail.
package cloudlogtest
