// Package export implements `falcon exp logs export`: every rank's log
// written to a bucket by the API server, with 001's LogExportResult.
package export
