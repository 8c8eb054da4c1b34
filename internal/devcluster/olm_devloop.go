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
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/internal/deploy/helm"
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
	bins, sups, err := operatorimage.Compile(ctx, operatorimage.Compilation{Root: c.Root, OutDir: out, Platforms: []string{platform}, Flags: operatorimage.LocalBuildFlags})
	if err != nil {
		return "", err
	}
	res, err := operatorimage.Push(ctx, operatorimage.Options{Binaries: bins, Supervisors: sups, Revision: "v" + version}, OperatorRepository+":v"+version, true)
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
	cfg, err := helm.NewConfigFactory(c.Config, "")(OperatorNamespace)
	if err != nil {
		return err
	}
	_, err = helm.Uninstall(cfg, helm.ActionOptions{ReleaseName: OperatorRelease, Namespace: OperatorNamespace, Timeout: 2 * time.Minute,
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
// except the CRDs, which stay with every object of theirs. OLM v1 makes
// itself the owner of all it installs, CRDs included, so deleting the
// ClusterExtension outright would delete every DevEnvironment with the
// CRD; a delete orphaning its objects is not enough either (the garbage
// collector deleted the CRD anyway, once, on this cluster). So:
// operator-controller is stopped, so that it cannot put its ownership back;
// the CRDs lose their owner references, OLM's labels and Helm's ownership
// metadata; the ClusterExtension is deleted and, since its controller is
// not there to run them, its finalizers (caches of that controller only)
// are dropped; the garbage collector then deletes everything else it
// installed, and the install namespace, the extension's ClusterRoles and
// bindings and OLM's Helm release records are deleted explicitly too (an
// interrupted run leaves them orphaned). operator-controller is started
// again last. Nothing there is no error.
func (c *Cluster) HandBackFromOLM(ctx context.Context, extension, installNamespace string, crds ...string) error {
	if err := c.scaleDeployment(ctx, OLMNamespace, operatorControllerDeployment, 0); err != nil {
		return err
	}
	restarted := false
	defer func() {
		if !restarted {
			_ = c.scaleDeployment(context.Background(), OLMNamespace, operatorControllerDeployment, 1)
		}
	}()
	for _, crd := range crds {
		if err := c.releaseCRD(ctx, crd); err != nil {
			return err
		}
	}
	ext := &unstructured.Unstructured{}
	ext.SetAPIVersion("olm.operatorframework.io/v1")
	ext.SetKind("ClusterExtension")
	ext.SetName(extension)
	if err := c.Client.Delete(ctx, ext); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting ClusterExtension %s: %w", extension, err)
	}
	if err := c.Client.Patch(ctx, ext, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`))); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("ClusterExtension %s: %w", extension, err)
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
	restarted = true
	if err := c.scaleDeployment(ctx, OLMNamespace, operatorControllerDeployment, 1); err != nil {
		return err
	}
	for _, crd := range crds {
		if err := c.Client.Get(ctx, client.ObjectKey{Name: crd}, crdObject(crd)); err != nil {
			return fmt.Errorf("CRD %s after OLM's uninstall: %w", crd, err)
		}
	}
	return nil
}

// releaseCRD removes OLM's ownership of a CRD: its owner references (only
// OLM sets any on devloop's CRD), OLM's labels and Helm's metadata, and
// checks the owner references are gone.
func (c *Cluster) releaseCRD(ctx context.Context, name string) error {
	patch := fmt.Sprintf(`{"metadata":{"ownerReferences":null,"labels":{"app.kubernetes.io/managed-by":null,%q:null,%q:null},`+
		`"annotations":{"meta.helm.sh/release-name":null,"meta.helm.sh/release-namespace":null}}}`, olmOwnerKindLabel, olmOwnerNameLabel)
	crd := crdObject(name)
	if err := c.Client.Patch(ctx, crd, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("CRD %s: %w", name, err)
	}
	if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
		return err
	}
	if refs := crd.GetOwnerReferences(); len(refs) > 0 {
		return fmt.Errorf("CRD %s still has owner references %v", name, refs)
	}
	return nil
}

// scaleDeployment sets the Deployment's replicas and waits until it has
// rolled out (for 0: until its pods are gone).
func (c *Cluster) scaleDeployment(ctx context.Context, ns, name string, replicas int32) error {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Client.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)))); err != nil {
		return fmt.Errorf("scaling deployment %s/%s: %w", ns, name, err)
	}
	if replicas > 0 {
		return c.waitRollout(ctx, ns, name, 3*time.Minute)
	}
	return c.waitGone(ctx, 2*time.Minute, func() (bool, error) {
		pods := &corev1.PodList{}
		if err := c.Client.List(ctx, pods, client.InNamespace(ns)); err != nil {
			return false, err
		}
		for _, p := range pods.Items {
			if strings.HasPrefix(p.Name, name+"-") {
				return false, nil
			}
		}
		return true, nil
	}, "the pods of deployment "+ns+"/"+name)
}

func crdObject(name string) *unstructured.Unstructured {
	crd := &unstructured.Unstructured{}
	crd.SetAPIVersion("apiextensions.k8s.io/v1")
	crd.SetKind("CustomResourceDefinition")
	crd.SetName(name)
	return crd
}
