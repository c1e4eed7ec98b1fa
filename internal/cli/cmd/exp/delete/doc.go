// Package delete implements `falcon exp delete`: remove an experiment's
// record. Like abort it asks first, and refuses without --yes when nobody
// can answer.
package delete
