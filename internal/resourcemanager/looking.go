package resourcemanager

// looking is the state of a look made outside the cycle (the deck's at a
// slot holder, ends' at a Running job): one goroutine at a time asks the
// backend, and a report that comes while it asks makes it ask once more
// rather than start another. Its methods are called under the owner's
// lock.
type looking struct {
	// observing: a goroutine is asking; again: a report came meanwhile.
	observing, again bool
}

// start reports whether a new look must start; if one is in flight, it
// is asked to look once more instead.
func (l *looking) start() bool {
	if l.observing {
		l.again = true
		return false
	}
	l.observing = true
	return true
}

// more reports whether the look in flight must ask again, a report having
// come meanwhile; if not, the look is over.
func (l *looking) more() bool {
	if !l.again {
		l.observing = false
		return false
	}
	l.again = false
	return true
}
