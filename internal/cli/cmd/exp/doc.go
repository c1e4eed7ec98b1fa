// Package exp groups the experiment commands (`falcon exp ...`), the ones
// users type most: create, validate, get, list, logs, wait, abort, delete.
// Each verb lives in its own package below so that its flags, its work and
// its tests read as one unit.
package exp
