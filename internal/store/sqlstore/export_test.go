package sqlstore

// PageToken is the token that continues a list after the row with seq.
func PageToken(seq int64) string { return encodeToken(seq) }
