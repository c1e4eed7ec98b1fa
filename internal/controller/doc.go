// Package controller groups Falcon's control loops: exp (the expController,
// which derives experiment and artifact status from jobs wherever a job
// write has not already) and watch (how a loop learns that it should run
// now rather than at its next poll). The resource manager, which moves
// jobs, lives in internal/resourcemanager.
package controller
