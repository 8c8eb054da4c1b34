package devcluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/deploy"
	"github.com/devloop-dev/devloop/internal/olm"
	"github.com/devloop-dev/devloop/internal/operatorimage"
)

// devloop published and installed through OLM v1 on the local cluster:
// its bundle and catalog images pushed to the cluster's registry, the
// installer ServiceAccount of config/olm/installer-rbac.yaml, and the
// chart-installed operator stepped aside meanwhile.

// DevEnvironmentCRD is the CRD both the chart and the bundle install.
const DevEnvironmentCRD = "devenvironments.devloop.dev"

// PushOperatorRelease compiles the manager and pushes it as
// OperatorRepository:v<version>, labelled with the version as its revision:
// the code of this checkout under a digest of its own, as a release has.
func (c *Cluster) PushOperatorRelease(ctx context.Context, version string) (string, error) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	out, err := os.MkdirTemp("", "devloop-manager-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(out)
	bins, err := operatorimage.Compile(ctx, c.Root, out, []string{platform})
	if err != nil {
		return "", err
	}
	res, err := operatorimage.Push(ctx, operatorimage.Options{Binaries: bins, Revision: "v" + version}, OperatorRepository+":v"+version, true)
	if err != nil {
		return "", err
	}
	return res.Reference, nil
}

// PushOLMBundle writes devloop's registry+v1 bundle of version, running
// image (repository@digest), as make bundle does, and pushes it as
// <prefix>/devloop-bundle:v<version>. It returns repository@digest.
func (c *Cluster) PushOLMBundle(ctx context.Context, prefix, version, image string) (string, error) {
	files, err := olm.Bundle(c.Root, olm.BundleOptions{Version: version, Image: image})
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "devloop-olm-bundle-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	bundle := filepath.Join(dir, "bundle")
	if err := olm.WriteDir(bundle, files); err != nil {
		return "", err
	}
	return olm.PushBundleDir(ctx, bundle, prefix, version, true)
}

// PushOLMCatalog renders the file-based catalog of bundles (pushed bundle
// images, oldest first) with opm from a semver template, as make catalog
// does, and pushes it as <prefix>/devloop-catalog:<tag>. It returns
// repository@digest.
func (c *Cluster) PushOLMCatalog(ctx context.Context, prefix, tag string, bundles []string) (string, error) {
	opm, err := c.opm(ctx)
	if err != nil {
		return "", err
	}
	fbc, err := olm.RenderSemverCatalog(ctx, opm, bundles, true)
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "devloop-olm-catalog-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	if err := olm.WriteDir(filepath.Join(dir, olm.Package), map[string][]byte{"catalog.yaml": fbc}); err != nil {
		return "", err
	}
	return olm.PushCatalogDir(ctx, dir, prefix, tag, true)
}

// opm is hack/opm.sh's binary (built once, cached under bin/opm).
func (c *Cluster) opm(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(c.Root, "hack", "opm.sh"))
	cmd.Dir = c.Root
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("hack/opm.sh: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

// InstallerRBAC is config/olm/installer-rbac.yaml, the ServiceAccount a
// ClusterExtension installs devloop as and its rights, moved from the
// namespace it names to ns.
func (c *Cluster) InstallerRBAC(ns string) ([]*unstructured.Unstructured, error) {
	objs, err := readYAMLObjects(filepath.Join(c.Root, "config", "olm", "installer-rbac.yaml"))
	if err != nil {
		return nil, err
	}
	for _, o := range objs {
		if o.GetNamespace() == olm.InstallNamespace {
			o.SetNamespace(ns)
		}
		subjects, _, _ := unstructured.NestedSlice(o.Object, "subjects")
		for _, s := range subjects {
			if m := s.(map[string]any); m["namespace"] == olm.InstallNamespace {
				m["namespace"] = ns
			}
		}
		if subjects != nil {
			if err := unstructured.SetNestedSlice(o.Object, subjects, "subjects"); err != nil {
				return nil, err
			}
		}
	}
	return objs, nil
}

// ApplyOLMObjects applies objs server-side as the OLM end-to-end objects'
// field manager.
func (c *Cluster) ApplyOLMObjects(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, o := range objs {
		if err := c.applyOLM(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// UninstallOperator uninstalls the chart-installed operator (the Helm
// release InstallOperator makes) and waits until its pods are gone. The
// CRD stays: Helm never deletes a chart's crds/. No release is no error.
func (c *Cluster) UninstallOperator(ctx context.Context) error {
	cfg, err := deploy.NewConfigFactory(c.Config, "")(OperatorNamespace)
	if err != nil {
		return err
	}
	_, err = deploy.Uninstall(cfg, deploy.ActionOptions{ReleaseName: OperatorRelease, Namespace: OperatorNamespace, Timeout: 2 * time.Minute,
		Description: "the end-to-end suite installs devloop with OLM v1"})
	if err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
		return fmt.Errorf("helm uninstall %s/%s: %w", OperatorNamespace, OperatorRelease, err)
	}
	return c.waitGone(ctx, 2*time.Minute, func() (bool, error) {
		pods := &corev1.PodList{}
		if err := c.Client.List(ctx, pods, client.InNamespace(OperatorNamespace)); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, OperatorDeployment+"-") {
				return false, nil
			}
		}
		return true, nil
	}, "the chart-installed operator's pods")
}

// waitGone polls gone every 300 ms until it says true.
func (c *Cluster) waitGone(ctx context.Context, timeout time.Duration, gone func() (bool, error), what string) error {
	deadline := time.Now().Add(timeout)
	for {
		ok, err := gone()
		if err != nil {
			return err
		}
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still there after %s", what, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// Labels OLM v1 puts on every object a ClusterExtension installs.
const (
	olmOwnerKindLabel = "olm.operatorframework.io/owner-kind"
	olmOwnerNameLabel = "olm.operatorframework.io/owner-name"
)

// AdoptCRD gives an existing CRD the ownership metadata Helm wants before
// it takes an object into a release: OLM v1 installs a bundle as the Helm
// release named after the ClusterExtension, in its install namespace, and
// refuses a CRD that exists but belongs to no such release.
func (c *Cluster) AdoptCRD(ctx context.Context, crd, release, namespace string) error {
	patch := fmt.Sprintf(`{"metadata":{"labels":{"app.kubernetes.io/managed-by":"Helm"},`+
		`"annotations":{"meta.helm.sh/release-name":%q,"meta.helm.sh/release-namespace":%q}}}`, release, namespace)
	return c.Client.Patch(ctx, crdObject(crd), client.RawPatch(types.MergePatchType, []byte(patch)))
}

// HandBackFromOLM uninstalls what the ClusterExtension extension installed
// except the CRDs, which stay with every object of theirs: OLM v1 makes
// itself the owner of all it installs, CRDs included, so deleting the
// ClusterExtension outright would delete every DevEnvironment with the
// CRD. It is deleted orphaning its objects instead; then the install
// namespace (the operator's Deployment with it, waited for) and the
// cluster-scoped objects labelled as the extension's are deleted, Helm's
// release records in OLMNamespace too, and the CRDs lose OLM's labels and
// Helm's ownership metadata.
func (c *Cluster) HandBackFromOLM(ctx context.Context, extension, installNamespace string, crds ...string) error {
	ext := &unstructured.Unstructured{}
	ext.SetAPIVersion("olm.operatorframework.io/v1")
	ext.SetKind("ClusterExtension")
	ext.SetName(extension)
	if err := c.Client.Delete(ctx, ext, client.PropagationPolicy(metav1.DeletePropagationOrphan)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting ClusterExtension %s: %w", extension, err)
	}
	if err := c.waitGone(ctx, 2*time.Minute, func() (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: extension}, ext)
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}, "ClusterExtension "+extension); err != nil {
		return err
	}
	owned := client.MatchingLabels{olmOwnerKindLabel: "ClusterExtension", olmOwnerNameLabel: extension}
	for _, kind := range []string{"ClusterRole", "ClusterRoleBinding"} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: kind + "List"})
		if err := c.Client.List(ctx, list, owned); err != nil {
			return err
		}
		for i := range list.Items {
			if err := c.Client.Delete(ctx, &list.Items[i]); client.IgnoreNotFound(err) != nil {
				return err
			}
		}
	}
	// The Helm release records OLM v1 keeps in its own namespace (index
	// Secrets labelled with the release and operator-controller as owner;
	// their chunks are owned by them): left, they would make the next
	// ClusterExtension of that name an upgrade of this release.
	if err := c.Client.DeleteAllOf(ctx, &corev1.Secret{}, client.InNamespace(OLMNamespace),
		client.MatchingLabels{"owner": "operator-controller", "name": extension}); err != nil {
		return err
	}
	if err := c.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: installNamespace}}); client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := c.waitGone(ctx, 3*time.Minute, func() (bool, error) {
		err := c.Client.Get(ctx, client.ObjectKey{Name: installNamespace}, &corev1.Namespace{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	}, "namespace "+installNamespace); err != nil {
		return err
	}
	for _, crd := range crds {
		patch := fmt.Sprintf(`{"metadata":{"ownerReferences":null,"labels":{"app.kubernetes.io/managed-by":null,%q:null,%q:null},`+
			`"annotations":{"meta.helm.sh/release-name":null,"meta.helm.sh/release-namespace":null}}}`, olmOwnerKindLabel, olmOwnerNameLabel)
		if err := c.Client.Patch(ctx, crdObject(crd), client.RawPatch(types.MergePatchType, []byte(patch))); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("CRD %s: %w", crd, err)
		}
	}
	return nil
}

func crdObject(name string) *unstructured.Unstructured {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(name)
	return crd
}
