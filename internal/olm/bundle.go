// Package olm makes devloop's OLM artifacts from the real manifests: the
// registry+v1 bundle (a ClusterServiceVersion built with
// operator-framework/api's types from `kustomize build config/default`),
// the installer RBAC OLM v1's ClusterExtension runs as, the file-based
// catalog rendered by opm from a semver template, and the bundle and
// catalog images (go-containerregistry, OLM's label conventions).
package olm

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/blang/semver/v4"
	"github.com/operator-framework/api/pkg/lib/version"
	operatorsv1alpha1 "github.com/operator-framework/api/pkg/operators/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// Package is the OLM package name; Channels are the channels a bundle of
// this major version is published to (docs/versioning.md).
const (
	Package        = "devloop"
	DefaultChannel = "stable-v0"
	// MinKubeVersion is the oldest Kubernetes the CRD's CEL rules and the
	// manager's client are tested against.
	MinKubeVersion = "1.30.0"
	// ManagerImage, BundleRepository and CatalogRepository are the public
	// names of the published images.
	ManagerImage      = "ghcr.io/devloop-dev/devloop"
	BundleRepository  = "ghcr.io/devloop-dev/devloop-bundle"
	CatalogRepository = "ghcr.io/devloop-dev/devloop-catalog"
)

// Channels of a 0.x bundle, made by the semver template.
var Channels = []string{"stable-v0", "fast-v0"}

// BundleOptions choose the version and the manager image.
type BundleOptions struct {
	// Version is the operator's semantic version, without a leading v.
	Version string
	// Image is the manager image; empty means ManagerImage:v<Version>.
	Image string
}

// Bundle returns the files of the registry+v1 bundle of the module at root,
// by path relative to the bundle directory.
func Bundle(root string, o BundleOptions) (map[string][]byte, error) {
	v, err := semver.Parse(o.Version)
	if err != nil {
		return nil, fmt.Errorf("bundle version %q: %w", o.Version, err)
	}
	image := o.Image
	if image == "" {
		image = ManagerImage + ":v" + v.String()
	}
	objs, err := kustomizeBuild(filepath.Join(root, "config", "default"))
	if err != nil {
		return nil, err
	}
	in, err := sortInstall(objs)
	if err != nil {
		return nil, err
	}
	example, err := almExample(root)
	if err != nil {
		return nil, err
	}
	csv := clusterServiceVersion(v, image, in, example)

	files := map[string][]byte{}
	if files["manifests/devloop.clusterserviceversion.yaml"], err = toYAML(csv); err != nil {
		return nil, err
	}
	if files["manifests/devloop.dev_devenvironments.yaml"], err = os.ReadFile(filepath.Join(root, "config", "crd", "bases", "devloop.dev_devenvironments.yaml")); err != nil {
		return nil, err
	}
	// Objects OLM installs as they are, beside the CSV's deployment and
	// permissions.
	for _, u := range in.extra {
		u.SetNamespace("")
		name := fmt.Sprintf("manifests/%s_%s.yaml", u.GetName(), strings.ToLower(u.GetKind()))
		if files[name], err = toYAML(u.Object); err != nil {
			return nil, err
		}
	}
	files["metadata/annotations.yaml"], err = toYAML(map[string]any{"annotations": Annotations()})
	return files, err
}

// Annotations are the bundle's metadata/annotations.yaml, and the labels of
// its image.
func Annotations() map[string]string {
	return map[string]string{
		"operators.operatorframework.io.bundle.mediatype.v1":       "registry+v1",
		"operators.operatorframework.io.bundle.manifests.v1":       "manifests/",
		"operators.operatorframework.io.bundle.metadata.v1":        "metadata/",
		"operators.operatorframework.io.bundle.package.v1":         Package,
		"operators.operatorframework.io.bundle.channels.v1":        strings.Join(Channels, ","),
		"operators.operatorframework.io.bundle.channel.default.v1": DefaultChannel,
	}
}

// install is config/default sorted by what the CSV does with it.
type install struct {
	deployment     appsv1.Deployment
	serviceAccount string
	clusterRules   []rbacv1.PolicyRule
	rules          []rbacv1.PolicyRule
	// extra are objects of kinds a registry+v1 bundle carries as files:
	// the aggregated ClusterRoles and the metrics Service.
	extra []*unstructured.Unstructured
}

func sortInstall(objs []*unstructured.Unstructured) (*install, error) {
	in := &install{}
	for _, u := range objs {
		switch {
		case u.GetKind() == "Deployment" && u.GetName() == "devloop-manager":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &in.deployment); err != nil {
				return nil, err
			}
			in.serviceAccount = in.deployment.Spec.Template.Spec.ServiceAccountName
		case u.GetKind() == "ClusterRole" && u.GetName() == "devloop-manager-role":
			role := rbacv1.ClusterRole{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				return nil, err
			}
			in.clusterRules = role.Rules
		case u.GetKind() == "Role" && (u.GetName() == "devloop-leader-election-role" || u.GetName() == "devloop-build-cache-role"):
			// Both are the manager's in its own namespace: the CSV's
			// permissions (the Lease; the team cache's EndpointSlice).
			role := rbacv1.Role{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				return nil, err
			}
			in.rules = append(in.rules, role.Rules...)
		case u.GetKind() == "ClusterRole", u.GetKind() == "Service":
			in.extra = append(in.extra, u)
		case u.GetKind() == "Namespace", u.GetKind() == "ServiceAccount", u.GetKind() == "CustomResourceDefinition",
			u.GetKind() == "ClusterRoleBinding", u.GetKind() == "RoleBinding":
			// OLM makes the namespace, the ServiceAccount and the bindings
			// from the CSV; the CRD is a file of its own.
		default:
			return nil, fmt.Errorf("config/default has %s %s, which the bundle does not place", u.GetKind(), u.GetName())
		}
	}
	if in.serviceAccount == "" || in.clusterRules == nil || in.rules == nil {
		return nil, fmt.Errorf("config/default lacks the manager Deployment, its ClusterRole or its leader election Role")
	}
	sort.Slice(in.extra, func(i, j int) bool { return in.extra[i].GetName() < in.extra[j].GetName() })
	return in, nil
}

func clusterServiceVersion(v semver.Version, image string, in *install, example []byte) *operatorsv1alpha1.ClusterServiceVersion {
	dep := in.deployment.DeepCopy()
	for i := range dep.Spec.Template.Spec.Containers {
		c := &dep.Spec.Template.Spec.Containers[i]
		if c.Name != "manager" {
			continue
		}
		c.Image = image
		for j := range c.Env {
			if c.Env[j].Name == "DEVLOOP_HELPER_IMAGE" {
				c.Env[j].Value = image
			}
		}
	}
	return &operatorsv1alpha1.ClusterServiceVersion{
		TypeMeta: metav1.TypeMeta{APIVersion: operatorsv1alpha1.SchemeGroupVersion.String(), Kind: operatorsv1alpha1.ClusterServiceVersionKind},
		ObjectMeta: metav1.ObjectMeta{
			Name: Package + ".v" + v.String(),
			Annotations: map[string]string{
				"alm-examples":   string(example),
				"capabilities":   "Basic Install",
				"categories":     "Developer Tools",
				"containerImage": image,
				"description":    "A team's inner development loop as one reconciled DevEnvironment resource.",
				"repository":     "https://github.com/devloop-dev/devloop",
				"operatorframework.io/suggested-namespace":     "devloop-system",
				"features.operators.openshift.io/disconnected": "false",
			},
		},
		Spec: operatorsv1alpha1.ClusterServiceVersionSpec{
			DisplayName:    "devloop",
			Description:    csvDescription,
			Version:        version.OperatorVersion{Version: v},
			Maturity:       "alpha",
			MinKubeVersion: MinKubeVersion,
			Keywords:       []string{"development", "inner-loop", "gitops", "images", "helm", "tests"},
			Provider:       operatorsv1alpha1.AppLink{Name: "devloop", URL: "https://github.com/devloop-dev/devloop"},
			Maintainers:    []operatorsv1alpha1.Maintainer{{Name: "devloop maintainers", Email: "maintainers@devloop.dev"}},
			Links: []operatorsv1alpha1.AppLink{
				{Name: "Source", URL: "https://github.com/devloop-dev/devloop"},
				{Name: "Design", URL: "https://github.com/devloop-dev/devloop/blob/main/docs"},
			},
			// OLM v1 installs registry+v1 bundles that support
			// AllNamespaces: devloop watches DevEnvironments everywhere.
			InstallModes: []operatorsv1alpha1.InstallMode{
				{Type: operatorsv1alpha1.InstallModeTypeOwnNamespace, Supported: false},
				{Type: operatorsv1alpha1.InstallModeTypeSingleNamespace, Supported: false},
				{Type: operatorsv1alpha1.InstallModeTypeMultiNamespace, Supported: false},
				{Type: operatorsv1alpha1.InstallModeTypeAllNamespaces, Supported: true},
			},
			CustomResourceDefinitions: operatorsv1alpha1.CustomResourceDefinitions{Owned: []operatorsv1alpha1.CRDDescription{{
				Name:        "devenvironments.devloop.dev",
				Version:     "v1alpha1",
				Kind:        "DevEnvironment",
				DisplayName: "Dev Environment",
				Description: "A team's inner development loop: sources, images built without Docker, Helm charts and manifests deployed in dependency order, and test suites run on demand.",
				SpecDescriptors: []operatorsv1alpha1.SpecDescriptor{
					{Path: "serviceAccountName", DisplayName: "Service Account", Description: "Every write the environment makes is impersonated as this ServiceAccount."},
					{Path: "registry.prefix", DisplayName: "Registry prefix", Description: "Where built images are pushed."},
					{Path: "suspend", DisplayName: "Suspend", Description: "Stop reconciling; nothing deployed changes."},
				},
				StatusDescriptors: []operatorsv1alpha1.StatusDescriptor{
					{Path: "conditions", DisplayName: "Conditions", Description: "Ready, Reconciling and Stalled, kstatus-compatible.",
						XDescriptors: []string{"urn:alm:descriptor:io.kubernetes.conditions"}},
					{Path: "componentsReady", DisplayName: "Components ready", Description: "Ready components of all components."},
				},
			}}},
			RelatedImages: []operatorsv1alpha1.RelatedImage{{Name: "manager", Image: image}},
			InstallStrategy: operatorsv1alpha1.NamedInstallStrategy{
				StrategyName: operatorsv1alpha1.InstallStrategyNameDeployment,
				StrategySpec: operatorsv1alpha1.StrategyDetailsDeployment{
					DeploymentSpecs: []operatorsv1alpha1.StrategyDeploymentSpec{{
						Name:  dep.Name,
						Label: dep.Labels,
						Spec:  dep.Spec,
					}},
					ClusterPermissions: []operatorsv1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: in.serviceAccount, Rules: in.clusterRules}},
					Permissions:        []operatorsv1alpha1.StrategyDeploymentPermissions{{ServiceAccountName: in.serviceAccount, Rules: in.rules}},
				},
			},
		},
	}
}

const csvDescription = `devloop runs a team's inner development loop inside the cluster, declared as one DevEnvironment:
the sources (git, OCI artifacts, Flux sources), the images to build (with go-containerregistry, no Docker
daemon), the Helm charts and manifests to deploy in dependency order, and the test suites to run as Jobs.

Every write an environment makes is impersonated as its ServiceAccount: whoever may create a DevEnvironment
gains no rights through it. The status is kstatus-compatible, so Flux health checks and kubectl wait work.`

// almExample is the console's example object: the sample of make run-local.
func almExample(root string) ([]byte, error) {
	data, err := os.ReadFile(filepath.Join(root, "config", "samples", "local", "hello.yaml"))
	if err != nil {
		return nil, err
	}
	var obj map[string]any
	if err := yaml.Unmarshal(data, &obj); err != nil {
		return nil, err
	}
	return json.Marshal([]any{obj})
}

func kustomizeBuild(dir string) ([]*unstructured.Unstructured, error) {
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range res.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, err
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// toYAML marshals v with sorted keys, without the empty status and null
// creation timestamps Go's types would write.
func toYAML(v any) ([]byte, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	delete(m, "status")
	dropNulls(m)
	return yaml.Marshal(m)
}

func dropNulls(v any) {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if e == nil {
				delete(x, k)
				continue
			}
			if mm, ok := e.(map[string]any); ok && len(mm) == 0 && k == "resources" {
				continue
			}
			dropNulls(e)
		}
	case []any:
		for _, e := range x {
			dropNulls(e)
		}
	}
}

// WriteDir replaces dir with files.
func WriteDir(dir string, files map[string][]byte) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
