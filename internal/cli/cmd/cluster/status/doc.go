// Package status implements `falcon cluster status`: the capacity view of one
// cluster as the resource manager last reported it, meaning its default
// reservation, the node pools Falcon made and the per-topology queues. It
// answers "why is my job still waiting?" without access to the cloud project.
package status
