// Package grafana holds Falcon's Grafana dashboard (falcon.json) and the
// test that keeps it honest: every metric a panel queries must be exported
// by the real binary, scraped from `falcon dev` after a small run on a GKE
// cluster (fakegke joined to a real kube-apiserver), so a renamed metric
// breaks the build rather than a panel.
package grafana
