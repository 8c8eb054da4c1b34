//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// OLM v1's objects, read as unstructured: its Go API module would pull
// the whole operator-controller module into devloop's go.mod.
var (
	clusterCatalogGVK   = schema.GroupVersionKind{Group: "olm.operatorframework.io", Version: "v1", Kind: "ClusterCatalog"}
	clusterExtensionGVK = schema.GroupVersionKind{Group: "olm.operatorframework.io", Version: "v1", Kind: "ClusterExtension"}
)

func olmObject(gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
	return unstructuredObject(gvk, "", name)
}

// olmStatus is the part of a ClusterCatalog's or ClusterExtension's
// status the test reads.
type olmStatus struct {
	Conditions     []metav1.Condition `json:"conditions"`
	ResolvedSource *struct {
		Image *struct {
			Ref string `json:"ref"`
		} `json:"image"`
	} `json:"resolvedSource"`
	Install *struct {
		Bundle struct {
			Name    string `json:"name"`
			Version string `json:"version"`
		} `json:"bundle"`
	} `json:"install"`
}

func getOLMStatus(ctx context.Context, gvk schema.GroupVersionKind, name string) (*olmStatus, error) {
	u := olmObject(gvk, name)
	if err := dc.Client.Get(ctx, client.ObjectKey{Name: name}, u); err != nil {
		return nil, err
	}
	st := &olmStatus{}
	raw, _, _ := unstructured.NestedMap(u.Object, "status")
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, st); err != nil {
		return nil, err
	}
	return st, nil
}

// resolvedDigest is the digest catalogd last unpacked ("" before that).
func (s *olmStatus) resolvedDigest() string {
	if s.ResolvedSource == nil || s.ResolvedSource.Image == nil {
		return ""
	}
	_, d, _ := strings.Cut(s.ResolvedSource.Image.Ref, "@")
	return d
}

// installedVersion is the bundle version the ClusterExtension installed.
func (s *olmStatus) installedVersion() string {
	if s.Install == nil {
		return ""
	}
	return s.Install.Bundle.Version
}

func (s *olmStatus) isTrue(cond string) bool {
	return meta.IsStatusConditionTrue(s.Conditions, cond)
}

// summary is each condition as Type=Status (Reason: message), bounded.
func (s *olmStatus) summary() string {
	var parts []string
	for _, c := range s.Conditions {
		if strings.HasSuffix(c.Type, "Deprecated") {
			continue // four of them, False unless the catalog deprecates
		}
		msg := c.Message
		if len(msg) > 160 {
			msg = msg[:160] + "…"
		}
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, msg))
	}
	if v := s.installedVersion(); v != "" {
		parts = append(parts, "installed "+v)
	}
	return strings.Join(parts, "; ")
}

// clusterCatalog is the ClusterCatalog of the catalog image ref (a tag:
// catalogd polls it every minute, as a published catalog is followed).
func clusterCatalog(name, ref string) string {
	return `apiVersion: olm.operatorframework.io/v1
kind: ClusterCatalog
metadata: {name: ` + name + `}
spec:
  source:
    type: Image
    image:
      ref: ` + ref + `
      pollIntervalMinutes: 1
`
}

// clusterExtension installs devloop from channel stable-v0 into ns as the
// installer ServiceAccount of config/olm/installer-rbac.yaml, as the
// README's OLM install does.
func clusterExtension(ns, catalog string) string {
	return `apiVersion: olm.operatorframework.io/v1
kind: ClusterExtension
metadata: {name: devloop}
spec:
  namespace: ` + ns + `
  serviceAccount: {name: devloop-installer}
  source:
    sourceType: Catalog
    catalog:
      packageName: devloop
      channels: [stable-v0]
      selector:
        matchLabels: {olm.operatorframework.io/metadata.name: ` + catalog + `}
`
}
