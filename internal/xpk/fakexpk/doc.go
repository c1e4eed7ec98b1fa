// Command fakexpk is a test double of the xpk executable, for tests that
// cannot reach gcloud and GKE: built once by a test into a temporary
// directory and run exactly as the real xpk would be.
//
// It parses its arguments as xpk's argparse parsers do (workload create,
// list and delete, with xpk's flags, choices, required flags, mutually
// exclusive groups and unique-prefix abbreviations): an unknown flag or a
// missing required one exits 2 with an argparse usage and error on stderr.
// Beyond xpk's own flags it takes --namespace on workload create, which
// design 001 passes and upstream xpk does not have (see package xpk).
//
// Every invocation is appended as one JSON line ({"args": [...]}) to the
// file named by FAKEXPK_LOG. Output is xpk's: its [XPK] log lines on
// stdout, the workload list table as xpk renders it, kubectl's NotFound on
// stderr for a delete of a missing workload.
//
// Workloads live in one of two places:
//   - with FAKEXPK_KUBECONFIG, on a real cluster: create makes a batch/v1
//     Job per slice (--num-slices), named and labelled as xpk's JobSet
//     makes them (<workload>-slice-job-<i>; xpk.google.com/workload,
//     kueue.x-k8s.io/queue-name, jobset.sigs.k8s.io/jobset-name and
//     job-index), with the MEGASCALE variables on a multi-slice workload's
//     pods; delete removes them, and list derives each workload's row from
//     its Jobs' real status (every slice's pods ready: Admitted; all
//     complete or one failed: Finished), so a workload's state comes from
//     the cluster;
//   - otherwise in the JSON file FAKEXPK_STATE (name -> row), which tests
//     seed with any status.
//
// FAKEXPK_DELAY (a Go duration) delays every command, FAKEXPK_FAIL
// ("code:message") makes it print message on stderr and exit with code
// (only the subcommand FAKEXPK_FAIL_ON names, when set), and
// FAKEXPK_LIST_OUTPUT replaces the table of workload list verbatim.
package main
