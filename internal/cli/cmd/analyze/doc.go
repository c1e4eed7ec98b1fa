// Package analyze implements `falcon analyze`: analyses of experiments'
// artifacts run by the analysis controller next to the data (accuracy of
// numeric dumps; XProf profiles), waited for by default.
package analyze
