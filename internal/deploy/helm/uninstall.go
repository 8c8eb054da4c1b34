package helm

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/log"
)

// UninstallOwned removes the release o names, if owner (an environment's
// UID) installed it. A release that is not there (never installed, or
// its namespace deleted by hand with its storage) is done; one someone
// else installed is left. Stop the release's action in flight first
// (StopInFlight).
func UninstallOwned(ctx context.Context, configs ConfigFactory, owner string, o ActionOptions) error {
	cfg, err := configs(o.Namespace)
	if err != nil {
		return err
	}
	rls, err := LastRelease(cfg, o.ReleaseName)
	if err != nil {
		return fmt.Errorf("reading release %s/%s: %w", o.Namespace, o.ReleaseName, err)
	}
	if rls == nil {
		return nil
	}
	if !ReleaseOwnedBy(rls, owner) {
		log.FromContext(ctx).Info("leaving a release this environment does not own", "release", o.ReleaseName, "namespace", o.Namespace)
		return nil
	}
	if _, err := Uninstall(cfg, o); err != nil {
		return fmt.Errorf("uninstalling release %s/%s: %w", o.Namespace, o.ReleaseName, err)
	}
	written.forget(o.Namespace, o.ReleaseName)
	return nil
}
