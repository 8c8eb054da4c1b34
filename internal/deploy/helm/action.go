package helm

import (
	"context"
	"errors"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/postrender"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
)

// This file holds thin wrappers over Helm's actions. They translate plain
// options into action fields and make no decisions: what to run, and what
// a failure means, is decided by ReconcileRelease.

// ActionOptions are the options shared by the wrappers; each uses the ones
// its action knows.
type ActionOptions struct {
	// ReleaseName and Namespace name the release.
	ReleaseName string
	Namespace   string
	// Timeout bounds the action; zero means Helm's default.
	Timeout time.Duration
	// PostRenderer, when set, edits the rendered manifests before Helm
	// applies them.
	PostRenderer postrender.PostRenderer
	// CreateNamespace creates Namespace on install when it is missing.
	CreateNamespace bool
	// SkipCRDs installs without the chart's crds/ (helm install
	// --skip-crds); upgrades never install them.
	SkipCRDs bool
	// MaxHistory caps the revisions kept on upgrade and rollback; zero
	// keeps all.
	MaxHistory int
	// Labels are stored with the release (and on its storage Secret).
	Labels map[string]string
	// Description is recorded in the release info.
	Description string
	// SkipSchemaCheck turns off Helm's client-side OpenAPI check of the
	// rendered objects (DisableOpenAPIValidation).
	SkipSchemaCheck bool
}

// Install installs chrt with vals as a new release. It does not wait for
// workloads to become ready: readiness is checked separately.
func Install(ctx context.Context, cfg *action.Configuration, chrt *chart.Chart, vals map[string]any, o ActionOptions) (*release.Release, error) {
	a := action.NewInstall(cfg)
	a.ReleaseName = o.ReleaseName
	a.Namespace = o.Namespace
	a.Timeout = o.Timeout
	a.PostRenderer = o.PostRenderer
	a.CreateNamespace = o.CreateNamespace
	a.SkipCRDs = o.SkipCRDs
	a.Labels = o.Labels
	a.Description = o.Description
	a.DisableOpenAPIValidation = o.SkipSchemaCheck
	return a.RunWithContext(ctx, chrt, vals)
}

// Upgrade upgrades the release to chrt with exactly vals: values are reset,
// never reused from the previous revision, so the result does not depend
// on history.
func Upgrade(ctx context.Context, cfg *action.Configuration, chrt *chart.Chart, vals map[string]any, o ActionOptions) (*release.Release, error) {
	a := action.NewUpgrade(cfg)
	a.Namespace = o.Namespace
	a.Timeout = o.Timeout
	a.PostRenderer = o.PostRenderer
	a.MaxHistory = o.MaxHistory
	a.Labels = o.Labels
	a.Description = o.Description
	a.DisableOpenAPIValidation = o.SkipSchemaCheck
	// Without ResetValues, Helm reuses the previous values when vals is
	// empty.
	a.ResetValues = true
	return a.RunWithContext(ctx, o.ReleaseName, chrt, vals)
}

// Rollback rolls the release back to revision (the previous one when 0).
func Rollback(cfg *action.Configuration, revision int, o ActionOptions) error {
	a := action.NewRollback(cfg)
	a.Version = revision
	a.Timeout = o.Timeout
	a.MaxHistory = o.MaxHistory
	return a.Run(o.ReleaseName)
}

// Uninstall deletes the release's objects and its history.
func Uninstall(cfg *action.Configuration, o ActionOptions) (*release.UninstallReleaseResponse, error) {
	a := action.NewUninstall(cfg)
	a.Timeout = o.Timeout
	a.Description = o.Description
	return a.Run(o.ReleaseName)
}

// History returns up to max revisions of the release (all when 0).
func History(cfg *action.Configuration, name string, max int) ([]*release.Release, error) {
	a := action.NewHistory(cfg)
	a.Max = max
	return a.Run(name)
}

// LastRelease returns the highest revision of the release whatever its
// status, or nil when the release has never been stored.
func LastRelease(cfg *action.Configuration, name string) (*release.Release, error) {
	rls, err := cfg.Releases.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil, nil
	}
	return rls, err
}
