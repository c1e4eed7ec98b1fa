// Package extend implements `falcon exp extend`: give a running
// experiment more time before its ttl stops it.
package extend
