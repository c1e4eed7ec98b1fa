// Package ranks finds the ranks a command addresses in an experiment:
// every rank of a role, or of every role (All), named role/rank as exp
// logs marks its lines; and says an error of one rank (Err) with its code
// kept.
package ranks
