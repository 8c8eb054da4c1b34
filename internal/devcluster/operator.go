package devcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/deploy/helm"
)

// Where the operator runs.
const (
	OperatorNamespace  = "devloop-system"
	OperatorRelease    = "devloop"
	OperatorDeployment = "devloop-manager"
)

// InstallOperator installs or upgrades the operator from charts/devloop
// with image (repository@digest) and waits until its Deployment has rolled
// out. The CRD is applied server-side first: Helm installs a chart's crds/
// only once and never upgrades them.
func (c *Cluster) InstallOperator(ctx context.Context, image string, extraArgs ...string) error {
	return c.InstallOperatorWith(ctx, image, nil, extraArgs...)
}

// InstallOperatorWith is InstallOperator with more chart values (merged
// over the ones it sets, a key at a time at the top level): the bundled
// registry's e2e case turns registry.enabled on, then installs again
// without it.
func (c *Cluster) InstallOperatorWith(ctx context.Context, image string, more map[string]any, extraArgs ...string) error {
	if err := c.applyCRDs(ctx); err != nil {
		return err
	}
	dir := filepath.Join(c.Root, "charts", "devloop")
	ch, err := loader.Load(dir)
	if err != nil {
		return fmt.Errorf("loading %s: %w", dir, err)
	}
	repo, digest, ok := strings.Cut(image, "@")
	if !ok {
		return fmt.Errorf("operator image %q: want repository@digest", image)
	}
	args := make([]any, 0, len(extraArgs))
	for _, a := range extraArgs {
		args = append(args, a)
	}
	values := map[string]any{
		"image": map[string]any{"repository": repo, "digest": digest},
		// One replica on one node: no election to wait for when the
		// operator restarts (end-to-end case 7 kills it).
		"leaderElection": map[string]any{"enabled": false},
		"manager": map[string]any{
			"logFormat": "console",
			"extraArgs": args,
		},
	}
	for k, v := range more {
		values[k] = v
	}
	_, err = helm.ReconcileRelease(ctx, helm.ReleaseRequest{
		Configs:         helm.NewConfigFactory(c.Config, ""),
		ReleaseName:     OperatorRelease,
		Namespace:       OperatorNamespace,
		Chart:           ch,
		Values:          values,
		Timeout:         2 * time.Minute,
		CreateNamespace: true,
	})
	if err != nil {
		return fmt.Errorf("helm release %s/%s: %w", OperatorNamespace, OperatorRelease, err)
	}
	return c.waitRollout(ctx, OperatorNamespace, OperatorDeployment, 3*time.Minute)
}

// applyCRDs applies the chart's CRDs server-side, as `kubectl apply
// --server-side` would.
func (c *Cluster) applyCRDs(ctx context.Context) error {
	files, err := filepath.Glob(filepath.Join(c.Root, "charts", "devloop", "crds", "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("devloop-dev-up"), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s: %w", filepath.Base(f), err)
		}
	}
	return nil
}

// waitRollout waits until the Deployment's latest generation is
// available with every replica updated, as `kubectl rollout status`.
func (c *Cluster) waitRollout(ctx context.Context, ns, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		d := &appsv1.Deployment{}
		err := c.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d)
		if err == nil && rolledOut(d) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("deployment %s/%s not rolled out after %s:\n%s", ns, name, timeout, c.Diagnose(ns))
		case <-time.After(300 * time.Millisecond):
		}
	}
}

func rolledOut(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration >= d.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want
}
