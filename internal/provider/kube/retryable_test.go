package kube

import (
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/falconhq/falcon/internal/resourcemanager"
)

func TestRetryable(t *testing.T) {
	job := schema.GroupResource{Group: "batch", Resource: "jobs"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", fmt.Errorf("create Job: %w", syscall.ECONNREFUSED), true},
		{"cut mid-answer", fmt.Errorf("create Job: %w", io.ErrUnexpectedEOF), true},
		{"token expired", apierrors.NewUnauthorized("token expired"), true},
		{"apiserver overloaded", apierrors.NewTooManyRequests("slow down", 1), true},
		{"apiserver unavailable", apierrors.NewServiceUnavailable("etcd"), true},
		{"internal error", apierrors.NewInternalError(errors.New("boom")), true},
		{"server timeout", apierrors.NewServerTimeout(job, "create", 1), true},
		{"admission denied", apierrors.NewForbidden(job, "x", errors.New("admission webhook denied")), false},
		{"quota exceeded", apierrors.NewForbidden(job, "x", errors.New("exceeded quota")), false},
		{"invalid Job", apierrors.NewInvalid(schema.GroupKind{Group: "batch", Kind: "Job"}, "x", nil), false},
		{"bad request", apierrors.NewBadRequest("no"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := retryable(tt.err)
			var r *resourcemanager.RetryableError
			if got := errors.As(err, &r); got != tt.want {
				t.Errorf("retryable(%v) marked %t, want %t", tt.err, got, tt.want)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("retryable lost the error: %v", err)
			}
		})
	}
	if retryable(nil) != nil {
		t.Error("retryable(nil) != nil")
	}
}
