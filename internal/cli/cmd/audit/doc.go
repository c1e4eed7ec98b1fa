// Package audit groups the audit log commands (`falcon audit ...`): who
// made which mutating call, allowed or refused. Reading the log is an
// admin's; a server without authentication (falcon dev) makes its user one.
package audit
