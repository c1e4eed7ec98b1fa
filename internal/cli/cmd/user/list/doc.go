// Package list implements `falcon user list`: every registered user and
// service principal, and which are admins by email.
package list
