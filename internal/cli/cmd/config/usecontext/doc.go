// Package usecontext implements `falcon config use-context`: the named
// server commands use when nothing else names one.
package usecontext
