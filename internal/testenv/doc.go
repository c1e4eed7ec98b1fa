// Package testenv holds harnesses that run real Falcon dependencies for
// tests: apitest (a real API server over loopback on SQLite) and kubeenv
// (real Kubernetes control planes). Nothing here is a mock.
package testenv
