package olm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Another project's operator published through OLM v1 for its loop
// (USE-CASES.md #5, stakater/ipshield in docs/real-projects.md): what
// hack/projectolm and the end-to-end case TestRealIPShieldOLM both do,
// from the project's tree and the image its DevEnvironment built.

// ProjectRelease says what to publish.
type ProjectRelease struct {
	// Tree is the project's tree: bundle/ as its `make bundle` committed
	// it, catalog/package.yaml.
	Tree string
	// Prefix is the registry prefix the bundle and catalog images go to.
	Prefix string
	// Image is the operator image the loop built (repository@digest), run
	// by the CSV's manager container.
	Image string
	// Version of the development bundle (semver, no leading v); a later
	// build is published under a higher one, so the ClusterExtension
	// upgrades to it.
	Version string
	// Channel the bundle is published to (default "dev").
	Channel string
	// Opm is the opm binary.
	Opm string
	// Drop are containers taken out of the CSV (a sidecar nodes cannot pull).
	Drop []string
	// Insecure is plain HTTP to the registry.
	Insecure bool
}

// PublishedProject is what PublishProject pushed.
type PublishedProject struct {
	// Package is the OLM package name (the bundle's annotations).
	Package string
	// Channel the bundle is in.
	Channel string
	// Bundle and Catalog are the pushed images, repository@digest.
	Bundle, Catalog string
}

// PublishProject pushes the project's bundle running r.Image under
// r.Version, renders a file-based catalog of it alone (package.yaml, one
// channel) with opm, validates it and pushes it under the channel's tag.
func PublishProject(ctx context.Context, r ProjectRelease) (*PublishedProject, error) {
	if r.Prefix == "" || r.Image == "" {
		return nil, fmt.Errorf("a registry prefix and the built image are required")
	}
	if r.Channel == "" {
		r.Channel = "dev"
	}
	files, pkg, err := DevBundle(filepath.Join(r.Tree, "bundle"), DevBundleOptions{
		Version: r.Version, Channel: r.Channel, Images: map[string]string{"manager": r.Image}, Drop: r.Drop})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "devloop-project-olm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := WriteDir(filepath.Join(dir, "bundle"), files); err != nil {
		return nil, err
	}
	bundle, err := PushProjectBundle(ctx, filepath.Join(dir, "bundle"), r.Prefix, pkg+"-bundle", "v"+r.Version, r.Insecure)
	if err != nil {
		return nil, fmt.Errorf("bundle image: %w", err)
	}
	pkgYAML, err := os.ReadFile(filepath.Join(r.Tree, "catalog", "package.yaml"))
	if err != nil {
		return nil, err
	}
	fbc, err := RenderProjectCatalog(ctx, r.Opm, pkgYAML, r.Channel, bundle, r.Insecure)
	if err != nil {
		return nil, err
	}
	catalog := filepath.Join(dir, "catalog")
	if err := WriteDir(filepath.Join(catalog, pkg), map[string][]byte{"catalog.yaml": fbc}); err != nil {
		return nil, err
	}
	if err := ValidateCatalog(ctx, r.Opm, catalog); err != nil {
		return nil, err
	}
	ref, err := PushProjectCatalog(ctx, catalog, pkg, r.Prefix, pkg+"-catalog", r.Channel, r.Insecure)
	if err != nil {
		return nil, fmt.Errorf("catalog image: %w", err)
	}
	return &PublishedProject{Package: pkg, Channel: r.Channel, Bundle: bundle, Catalog: ref}, nil
}

// CatalogName is the ClusterCatalog's name.
func (p *PublishedProject) CatalogName() string { return p.Package + "-dev" }

// CatalogTag is the catalog image by its tag: the ClusterCatalog follows
// the tag, so the next publish is picked up without editing it.
func (p *PublishedProject) CatalogTag() string {
	return p.Catalog[:strings.LastIndex(p.Catalog, "@")] + ":" + p.Channel
}

// InstallYAML is what installs the package with OLM v1 into namespace
// (default <package>-system) as serviceAccount (default
// <package>-installer): the namespace, the installer ServiceAccount bound
// to cluster-admin (a development cluster only: a least-rights installer
// is derived from the CSV's permissions, as devloop's own
// config/olm/installer-rbac.yaml is), the ClusterCatalog polling the
// catalog's tag every minute and the ClusterExtension on the channel,
// taking any newer version (SelfCertified: the development catalog has
// one bundle, which replaces nothing).
func (p *PublishedProject) InstallYAML(namespace, serviceAccount string) string {
	if namespace == "" {
		namespace = p.Package + "-system"
	}
	if serviceAccount == "" {
		serviceAccount = p.Package + "-installer"
	}
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: %[3]s}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: %[4]s, namespace: %[3]s}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: %[4]s}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: %[4]s, namespace: %[3]s}]
---
apiVersion: olm.operatorframework.io/v1
kind: ClusterCatalog
metadata: {name: %[6]s}
spec:
  source:
    type: Image
    image: {ref: %[2]s, pollIntervalMinutes: 1}
---
apiVersion: olm.operatorframework.io/v1
kind: ClusterExtension
metadata: {name: %[1]s}
spec:
  namespace: %[3]s
  serviceAccount: {name: %[4]s}
  source:
    sourceType: Catalog
    catalog:
      packageName: %[1]s
      channels: [%[5]s]
      selector:
        matchLabels: {olm.operatorframework.io/metadata.name: %[6]s}
      upgradeConstraintPolicy: SelfCertified
`, p.Package, p.CatalogTag(), namespace, serviceAccount, p.Channel, p.CatalogName())
}
