package falconv1

// WriterKey is the gRPC metadata key with which a caller names itself on
// its job status writes (UpdateJobStatus, UpdateJobStatuses). The API
// server copies the name into each Change those writes publish
// (Change.writer), so a controller can tell the echoes of its own writes,
// whose rows it already holds, from everyone else's changes.
const WriterKey = "falcon-writer"
