package image

import (
	"fmt"
	"strings"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// OCI annotation keys used as config labels.
const (
	labelSource   = "org.opencontainers.image.source"
	labelRevision = "org.opencontainers.image.revision"
)

// withLayersAndConfig appends one layer per mapping to base, each with a
// history entry, then sets the config of img. Every timestamp is the epoch,
// so the result depends on nothing but the inputs.
func withLayersAndConfig(base v1.Image, img Spec, layers []v1.Layer, p v1.Platform) (v1.Image, error) {
	// A Docker base keeps Docker media types throughout: a manifest mixing
	// Docker and OCI layer types is rejected by some registries and runtimes.
	mt, err := base.MediaType()
	if err != nil {
		return nil, err
	}
	docker := mt == types.DockerManifestSchema2

	adds := make([]mutate.Addendum, len(layers))
	for i, l := range layers {
		m := img.Layers[i]
		lt, err := l.MediaType()
		if err != nil {
			return nil, err
		}
		adds[i] = mutate.Addendum{
			Layer:     l,
			MediaType: layerMediaType(lt, docker),
			History: v1.History{
				Created:   v1.Time{Time: epoch},
				CreatedBy: fmt.Sprintf("devloop: COPY %s %s", m.From, m.To),
				Comment:   "devloop",
			},
		}
	}
	withLayers, err := mutate.Append(base, adds...)
	if err != nil {
		return nil, err
	}

	cf, err := withLayers.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg := cf.DeepCopy()
	applyConfig(cfg, img, p)
	return mutate.ConfigFile(withLayers, cfg)
}

// layerMediaType is the manifest's type of a layer of type lt: the Docker
// equivalent on a Docker base.
func layerMediaType(lt types.MediaType, docker bool) types.MediaType {
	uncompressed := lt == types.OCIUncompressedLayer || lt == types.DockerUncompressedLayer
	switch {
	case docker && uncompressed:
		return types.DockerUncompressedLayer
	case docker:
		return types.DockerLayer
	case uncompressed:
		return types.OCIUncompressedLayer
	}
	return types.OCILayer
}

// applyConfig sets the fields of the spec on cfg, keeping the base's
// values for what the spec leaves out, as a Dockerfile would.
func applyConfig(cfg *v1.ConfigFile, img Spec, p v1.Platform) {
	cfg.Created = v1.Time{Time: epoch}
	if cfg.OS == "" && cfg.Architecture == "" {
		cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	}
	c := &cfg.Config
	if img.Entrypoint != nil {
		// Like ENTRYPOINT in a Dockerfile: a new entrypoint drops the base's
		// cmd, which were arguments for the base's entrypoint.
		c.Entrypoint = img.Entrypoint
		c.Cmd = img.Cmd
	} else if img.Cmd != nil {
		c.Cmd = img.Cmd
	}
	for _, e := range img.Env {
		c.Env = setEnv(c.Env, e.Name, e.Value)
	}
	if img.WorkingDir != "" {
		c.WorkingDir = img.WorkingDir
	}
	if img.User != "" {
		c.User = img.User
	}
	if img.SourceURL != "" || img.Revision != "" {
		if c.Labels == nil {
			c.Labels = map[string]string{}
		}
		if img.SourceURL != "" {
			c.Labels[labelSource] = img.SourceURL
		}
		if img.Revision != "" {
			c.Labels[labelRevision] = img.Revision
		}
	}
}

// setEnv sets name=value in env, replacing an existing entry in place.
func setEnv(env []string, name, value string) []string {
	entry := name + "=" + value
	for i, e := range env {
		if k, _, _ := strings.Cut(e, "="); k == name {
			out := append([]string(nil), env...)
			out[i] = entry
			return out
		}
	}
	return append(append([]string(nil), env...), entry)
}
