package cli

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// What a spec field expects of the object it names.
const (
	readsDockerConfig = "dockerconfig" // a kubernetes.io/dockerconfigjson Secret
	readsGit          = "git"          // username+password, or identity (+known_hosts)
	readsChart        = "chart"        // username+password, or a dockerconfigjson Secret
	readsValues       = "values"       // one key holding a YAML values document
)

// specRef is a place in an environment's spec that names a Secret or a
// ConfigMap of its namespace.
type specRef struct {
	field string // spec.registry.credentialsRef
	kind  string // Secret or ConfigMap
	name  string
	reads string // readsDockerConfig, ...
	key   string // readsValues: the key read
}

// specRefs lists every Secret and ConfigMap the spec names. Tests name
// none today (their env holds literal values only).
func specRefs(env *v1alpha1.DevEnvironment) []specRef {
	var refs []specRef
	spec := &env.Spec
	if r := spec.Registry; r != nil && r.CredentialsRef != nil {
		refs = append(refs, specRef{field: "spec.registry.credentialsRef", kind: "Secret", name: r.CredentialsRef.Name, reads: readsDockerConfig})
	}
	for i, src := range spec.Sources {
		switch {
		case src.Git != nil && src.Git.SecretRef != nil:
			refs = append(refs, specRef{field: fmt.Sprintf("spec.sources[%d].git.secretRef", i), kind: "Secret", name: src.Git.SecretRef.Name, reads: readsGit})
		case src.OCI != nil && src.OCI.SecretRef != nil:
			refs = append(refs, specRef{field: fmt.Sprintf("spec.sources[%d].oci.secretRef", i), kind: "Secret", name: src.OCI.SecretRef.Name, reads: readsDockerConfig})
		}
	}
	for i, cc := range spec.ChartCredentials {
		refs = append(refs, specRef{field: fmt.Sprintf("spec.chartCredentials[%d].secretRef", i), kind: "Secret", name: cc.SecretRef.Name, reads: readsChart})
	}
	for i, c := range spec.Components {
		for j, vf := range c.ValuesFrom() {
			key := vf.Key
			if key == "" {
				key = settingsKey
			}
			refs = append(refs, specRef{field: fmt.Sprintf("spec.components[%d].helm.valuesFrom[%d]", i, j), kind: vf.Kind, name: vf.Name, reads: readsValues, key: key})
		}
	}
	return refs
}

// writtenObject is what a command is about to write, as far as checking
// it against the spec goes: no values.
type writtenObject struct {
	kind       string // Secret or ConfigMap
	name       string
	secretType corev1.SecretType
	keys       []string // sorted
}

func (o writtenObject) String() string { return strings.ToLower(o.kind) + "/" + o.name }

// usage says which fields of env read o (uses) and what about o would
// not work for them or looks like a typo (warnings). Neither holds a value.
func usage(env *v1alpha1.DevEnvironment, o writtenObject) (uses, warnings []string) {
	refs := specRefs(env)
	for _, r := range refs {
		if r.name != o.name {
			continue
		}
		if r.kind != o.kind {
			warnings = append(warnings, fmt.Sprintf("%s names %s %s, not a %s: %s", r.field, r.kind, r.name, o.kind, kindHint(r.kind)))
			continue
		}
		uses = append(uses, r.field)
		if w := mismatch(r, o); w != "" {
			warnings = append(warnings, r.field+" "+w)
		}
	}
	if len(uses) == 0 && len(warnings) == 0 {
		warnings = append(warnings, fmt.Sprintf("devenvironment/%s does not reference %s (%s): a typo? Nothing reads it until the spec names it",
			env.Name, o, namedObjects(refs)))
	}
	return uses, warnings
}

// mismatch says why the field r cannot use o as written, or "".
func mismatch(r specRef, o writtenObject) string {
	has := func(k string) bool { _, ok := slices.BinarySearch(o.keys, k); return ok }
	docker := o.secretType == corev1.SecretTypeDockerConfigJson
	switch r.reads {
	case readsDockerConfig:
		if !docker {
			return "reads a kubernetes.io/dockerconfigjson Secret: write it with --docker-config or --docker-server"
		}
	case readsGit:
		if !(has("username") && has("password")) && !has("identity") {
			return "reads keys username and password (HTTPS) or identity and known_hosts (SSH), which this Secret does not have"
		}
	case readsChart:
		if !docker && !(has("username") && has("password")) {
			return "reads keys username and password, or a kubernetes.io/dockerconfigjson Secret"
		}
	case readsValues:
		if !has(r.key) {
			return fmt.Sprintf("reads key %q, which %s does not have (settings --key %s writes it)", r.key, o, r.key)
		}
	}
	return ""
}

func kindHint(kind string) string {
	if kind == "Secret" {
		return "settings writes a Secret with --secret"
	}
	return "settings writes a ConfigMap without --secret"
}

// namedObjects lists what the spec names, for spotting a typo.
func namedObjects(refs []specRef) string {
	var secrets, configMaps []string
	for _, r := range refs {
		switch r.kind {
		case "Secret":
			secrets = append(secrets, r.name)
		case "ConfigMap":
			configMaps = append(configMaps, r.name)
		}
	}
	list := func(names []string) string {
		slices.Sort(names)
		return strings.Join(slices.Compact(names), ", ")
	}
	switch {
	case len(secrets) == 0 && len(configMaps) == 0:
		return "it names no Secret or ConfigMap"
	case len(configMaps) == 0:
		return "it names the Secrets " + list(secrets)
	case len(secrets) == 0:
		return "it names the ConfigMaps " + list(configMaps)
	}
	return "it names the Secrets " + list(secrets) + " and the ConfigMaps " + list(configMaps)
}
