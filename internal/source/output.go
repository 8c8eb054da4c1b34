package source

import (
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// An output source (spec.sources[].output) is a directory a run step of
// the same environment produced: the build pushed it as an OCI artifact in
// the format `kubectl devloop push` writes and recorded it in the image's
// status.outputs (internal/build, outputs.go). It has no revision until
// that build, so it is not resolved with the others: its reference is read
// from status whenever a component asks for it, and its content is fetched
// by digest like any OCI source, with the environment's registry
// credentials (OutputOrigin).

// OutputRef is the reference of an output source: the artifact the
// producing image's latest build pushed. False when that image has not
// pushed the output yet (never built, or built before it declared it).
func OutputRef(env *v1alpha1.DevEnvironment, src v1alpha1.Source) (Ref, bool) {
	if src.Output == nil {
		return Ref{}, false
	}
	_, ist := env.BuiltImage(src.Output.Image)
	if ist == nil {
		return Ref{}, false
	}
	for _, o := range ist.Outputs {
		if o.Name != src.Output.Name || o.Repository == "" || !strings.HasPrefix(o.Digest, "sha256:") {
			continue
		}
		insecure := env.Spec.Registry != nil && env.Spec.Registry.Insecure
		return Ref{
			Source: src.Name, Kind: KindOCI, URL: o.Repository, Insecure: insecure,
			Revision: OutputRevision(src.Output.Image, o.Name, o.Digest),
			ID:       strings.TrimPrefix(o.Digest, "sha256:"), Digest: o.Digest,
		}, true
	}
	return Ref{}, false
}

// OutputRevision is what status.sources shows for an output source:
// "<image>/<output>@sha256:…".
func OutputRevision(image, output, digest string) string {
	return image + "/" + output + "@" + digest
}

// OutputOrigin is the OCI source an output source is fetched as: the
// artifact ref names in the environment's registry, pinned by digest, with
// the registry's credentials (spec.registry.credentialsRef), so access is
// checked and content cached exactly as for an oci source.
func OutputOrigin(env *v1alpha1.DevEnvironment, src v1alpha1.Source, ref Ref) v1alpha1.Source {
	origin := v1alpha1.Source{Name: src.Name, OCI: &v1alpha1.OCISource{
		Repository: ref.URL, Digest: ref.Digest, Insecure: ref.Insecure,
	}}
	if reg := env.Spec.Registry; reg != nil && reg.CredentialsRef != nil {
		origin.OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: reg.CredentialsRef.Name}
	}
	return origin
}
