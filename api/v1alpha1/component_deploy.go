package v1alpha1

import apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

// A component deploys a Helm chart, a set of manifests or nothing (it only
// builds images). These accessors answer what packages outside the deploy
// engine ask of that, so only this file and internal/deploy test which
// kind a component is (test/layout checks): a third kind is added here and
// there.

// Deployed reports whether the component deploys anything, not only
// builds images.
func (c *Component) Deployed() bool { return c.Helm != nil || c.Manifests != nil }

// DeploySource is the source the component's chart or manifests are
// taken from, and the path of the field naming it under the component
// ("helm", "chart", "source"). ok is false when the component deploys
// nothing from a source: no chart or manifests, or a chart from a
// repository.
func (c *Component) DeploySource() (source string, field []string, ok bool) {
	switch {
	case c.Helm != nil && c.Helm.Chart.Source != "":
		return c.Helm.Chart.Source, []string{"helm", "chart", "source"}, true
	case c.Manifests != nil:
		return c.Manifests.Source, []string{"manifests", "source"}, true
	}
	return "", nil, false
}

// DeployNamespace is the namespace the component's spec deploys to
// (helm.namespace or manifests.namespace); "" for the environment's.
func (c *Component) DeployNamespace() string {
	switch {
	case c.Helm != nil:
		return c.Helm.Namespace
	case c.Manifests != nil:
		return c.Manifests.Namespace
	}
	return ""
}

// ManifestPaths are the directories the component applies; ok is false
// when it applies no manifests.
func (c *Component) ManifestPaths() (paths []string, ok bool) {
	if c.Manifests == nil {
		return nil, false
	}
	return c.Manifests.Paths, true
}

// ReleaseName is the Helm release the component installs (the component's
// name unless helm.releaseName says); ok is false without a chart.
func (c *Component) ReleaseName() (name string, ok bool) {
	if c.Helm == nil {
		return "", false
	}
	if c.Helm.ReleaseName != "" {
		return c.Helm.ReleaseName, true
	}
	return c.Name, true
}

// HelmValues are the chart's inline values (helm.values); nil without a
// chart or values.
func (c *Component) HelmValues() *apiextensionsv1.JSON {
	if c.Helm == nil {
		return nil
	}
	return c.Helm.Values
}

// ValuesFrom are the ConfigMap and Secret keys the chart's values are read
// from (helm.valuesFrom); nil without a chart.
func (c *Component) ValuesFrom() []ValuesReference {
	if c.Helm == nil {
		return nil
	}
	return c.Helm.ValuesFrom
}

// ImageValues are the chart values the component's built images are
// written into (helm.imageValues); nil without a chart.
func (c *Component) ImageValues() []ImageValue {
	if c.Helm == nil {
		return nil
	}
	return c.Helm.ImageValues
}
