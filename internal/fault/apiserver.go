package fault

import (
	"errors"
	"net"
	"syscall"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// APIServerUnavailable reports the API server being unreachable or
// overloaded: an answer that says to come back later, or no answer.
func APIServerUnavailable(err error) bool {
	var netErr net.Error
	return apierrors.IsServiceUnavailable(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsTooManyRequests(err) || apierrors.IsInternalError(err) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) || errors.As(err, &netErr)
}
