// Package leader elects one active `falcon controller` among replicas, so
// that exactly one of them reconciles while the others wait to take over.
//
// An Elector campaigns and, while it holds leadership, runs the caller's
// lead function. Two rules make a change of leader safe for controllers that
// create Kubernetes Jobs and node pools:
//
//   - lead's context is cancelled as soon as this replica can no longer be
//     sure it leads (a renewal missed its deadline, the lock's connection
//     broke), and before another replica can win: every implementation
//     stops trusting its leadership a margin (LeaseDuration - RenewDeadline)
//     before the others may take it.
//   - leadership is released only after lead has returned. When the caller's
//     own context ends (SIGTERM), lead's context stays live and the
//     leadership is kept, renewed, while lead drains its in-flight work; the
//     release follows at once, so a standby takes over without waiting for
//     the lease to expire.
//
// Implementations:
//
//   - Lease: a Kubernetes coordination.k8s.io Lease through client-go's
//     leaderelection, for replicas running in a cluster. Takeover after a
//     leader dies without releasing takes up to LeaseDuration plus twice
//     the jittered RetryPeriod (about 12.4 s with DefaultTiming).
//
//   - MySQL: GET_LOCK held on one dedicated connection, for replicas that
//     share the store's MariaDB/MySQL but not a cluster. The lock lives and
//     dies with the connection: a leader that is killed frees it at once
//     (the server sees the socket close), a leader whose machine vanishes
//     frees it when the server drops the silent connection after
//     LeaseDuration (the session's wait_timeout). The holder checks the
//     connection every RetryPeriod with IS_USED_LOCK and gives up when no
//     check succeeded for RenewDeadline. Unlike a lease, the lock can be
//     freed while its holder still runs (the server killed the connection,
//     the database failed over); so a new holder waits RenewDeadline, the
//     longest the old one takes to notice, before it leads. Takeover thus
//     takes RenewDeadline after a graceful release or a killed leader
//     (5 s with DefaultTiming) and LeaseDuration + RenewDeadline after a
//     vanished one (13 s).
//
//   - Always: no election, for a single replica and for `falcon dev`.
//
// Should two terms overlap all the same (a leader paused longer than
// RenewDeadline), that is a waste, not a duplicate: every reconcile is
// conditional on the status it read, and Kubernetes Jobs and GKE node pools
// are named after the job that owns them, so a second create fails with
// AlreadyExists instead of making a duplicate.
package leader
