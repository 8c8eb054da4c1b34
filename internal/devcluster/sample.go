package devcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/source"
	"github.com/devloop-dev/devloop/internal/testenv"
)

// The sample of config/samples/dev.
const (
	SampleNamespace = "devloop-sample"
	SampleName      = "hello"
	// SampleSource is where the sample's source is pushed, as the OCI
	// source "app" of the sample names it.
	SampleSource = Registry + "/" + SampleNamespace + "/src:dev"
)

// SampleDir is the sample's source tree.
func (c *Cluster) SampleDir() string {
	return filepath.Join(c.Root, "config", "samples", "dev", "src")
}

// PrepareNamespace makes a namespace enforcing the restricted Pod Security
// profile, with the ServiceAccount "deployer" every write of an
// environment in it is made as (allowed everything in the namespace only).
func (c *Cluster) PrepareNamespace(ctx context.Context, ns string) error {
	n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns,
		Labels: map[string]string{"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := c.Client.Create(ctx, n); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return testenv.CreateDeployer(ctx, c.Client, ns, "deployer")
}

// PushSource pushes dir as the OCI artifact ref, as `kubectl devloop push`
// does, and returns its digest. The same content gives the same digest.
func PushSource(ctx context.Context, dir, ref string) (string, error) {
	d, err := source.PushDir(ctx, dir, ref, true)
	if err != nil {
		return "", fmt.Errorf("pushing %s to %s: %w", dir, ref, err)
	}
	return d.String(), nil
}

// Sample reads config/samples/dev/hello.yaml.
func (c *Cluster) Sample() (*v1alpha1.DevEnvironment, error) {
	path := filepath.Join(c.Root, "config", "samples", "dev", "hello.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	env := &v1alpha1.DevEnvironment{}
	if err := yaml.UnmarshalStrict(data, env); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return env, nil
}

// ApplyEnvironment applies env server-side, as `kubectl apply
// --server-side` does: the spec becomes what env says.
func (c *Cluster) ApplyEnvironment(ctx context.Context, env *v1alpha1.DevEnvironment) error {
	obj, err := toUnstructured(env)
	if err != nil {
		return err
	}
	return c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner("devloop-dev-up"), client.ForceOwnership)
}

func toUnstructured(env *v1alpha1.DevEnvironment) (*unstructured.Unstructured, error) {
	data, err := yaml.Marshal(env)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &u.Object); err != nil {
		return nil, err
	}
	u.SetAPIVersion(v1alpha1.GroupVersion.String())
	u.SetKind("DevEnvironment")
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// WaitReady follows the environment until Ready=True for its current
// generation, calling observe with each reading (every 200 ms); it fails
// at once, with the message, when the environment is Stalled.
func (c *Cluster) WaitReady(ctx context.Context, key client.ObjectKey, timeout time.Duration, observe func(*v1alpha1.DevEnvironment)) (*v1alpha1.DevEnvironment, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last := ""
	for {
		env := &v1alpha1.DevEnvironment{}
		err := c.Client.Get(ctx, key, env)
		if err == nil {
			last = Summary(env)
			if observe != nil {
				observe(env)
			}
			if env.Status.ObservedGeneration == env.Generation {
				if meta.IsStatusConditionTrue(env.Status.Conditions, v1alpha1.ConditionReady) {
					return env, nil
				}
				if s := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionStalled); s != nil && s.Status == metav1.ConditionTrue {
					return env, fmt.Errorf("%s is stalled (%s): %s", key, s.Reason, s.Message)
				}
			}
		}
		select {
		case <-ctx.Done():
			return env, fmt.Errorf("%s not Ready after %s: %s", key, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Summary is one line on an environment: each component's phase.
func Summary(env *v1alpha1.DevEnvironment) string {
	parts := make([]string, 0, len(env.Status.Components))
	for _, c := range env.Status.Components {
		parts = append(parts, c.Name+"="+string(c.Phase))
	}
	ready := "Ready=?"
	if r := meta.FindStatusCondition(env.Status.Conditions, v1alpha1.ConditionReady); r != nil {
		ready = "Ready=" + string(r.Status) + " (" + r.Reason + ")"
	}
	return ready + " " + strings.Join(parts, " ")
}
