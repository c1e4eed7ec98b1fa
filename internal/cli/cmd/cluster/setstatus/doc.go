// Package setstatus implements `falcon cluster set-status`: move a cluster
// to active, maintenance or offline by hand.
package setstatus
