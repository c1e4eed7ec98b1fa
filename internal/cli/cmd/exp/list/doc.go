// Package list implements `falcon exp list`: one page of experiments,
// filtered by cluster, status, type or creator.
package list
