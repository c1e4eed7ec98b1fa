// Package list implements `falcon cluster list`: every registered cluster.
package list
