// Package ranks finds the ranks a command addresses in an experiment: the
// job of the role asked for (or the only one) and how many ranks it has,
// named the way the API server names them when a role is wrong; and says
// an error of one rank (Err) with its code kept.
package ranks
