// Package wait implements `falcon exp wait`: block until experiments end
// and say how through the exit code, replacing the polling loops with
// deadlines and retries that users' scripts used to carry.
//
// It follows each experiment's event stream (internal/cli/expwatch), so it
// learns of the end as the server writes it, without polling; a restart of
// the API server or a dropped connection only makes it resume after the
// last event it saw, because a wait that dies on a restart fails hours of
// work for nothing. Several experiments are followed at once: --all (the
// default) fails fast on the first that does not succeed, --any returns
// with the first that ends.
package wait
