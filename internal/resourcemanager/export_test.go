package resourcemanager

// NearRefresh is how often the positions behind a queue's next in line are
// written again, for the tests that wait for it.
const NearRefresh = nearRefresh
