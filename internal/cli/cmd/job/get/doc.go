// Package get implements `falcon job get`: one job, with the reason and
// message that say what it is waiting for or why it failed.
package get
