package cli

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/ui"
)

// maxReleaseJSON bounds a decoded release (chart, manifest and values).
const maxReleaseJSON = 32 << 20

// Values reads the values the operator passed to Helm for the component's
// current release: Helm keeps each release in a Secret (the operator
// uses Helm's secret storage) whose "release" key is base64 of gzipped
// JSON, the values under "config". It reads it as the user; a user who
// may not read Secrets, or a component not released yet, gets the spec's
// values and valuesFrom names and a note saying so.
func (u *uiActions) Values(ctx context.Context, namespace, name, component string) (ui.HelmValues, error) {
	s := u.in(namespace)
	env, err := s.getEnv(ctx, name)
	if err != nil {
		return ui.HelmValues{}, err
	}
	i := componentIndex(env, component)
	if i < 0 {
		return ui.HelmValues{}, fmt.Errorf("devenvironment/%s has no component %q", name, component)
	}
	h := env.Spec.Components[i].Helm
	if h == nil {
		return ui.HelmValues{}, fmt.Errorf("component %s is not a Helm release", component)
	}
	fromSpec := func(why string) ui.HelmValues {
		v := ui.HelmValues{From: "spec", Note: why + fmt.Sprintf(": showing spec.components[%d].helm.values and the names in valuesFrom", i)}
		if h.Values != nil {
			_ = json.Unmarshal(h.Values.Raw, &v.Values)
		}
		for _, r := range h.ValuesFrom {
			v.ValuesFrom = append(v.ValuesFrom, r.Kind+"/"+r.Name+" key "+r.Key)
		}
		return v
	}
	st := env.Status.Component(component)
	if st == nil || st.Release == nil || st.Release.Revision == 0 {
		return fromSpec("not released yet"), nil
	}
	rel := st.Release
	sec := &corev1.Secret{}
	key := "sh.helm.release.v1." + rel.Name + ".v" + strconv.Itoa(rel.Revision)
	if err := s.client.Get(ctx, client.ObjectKey{Namespace: rel.Namespace, Name: key}, sec); err != nil {
		return fromSpec("the release's values could not be read (secret " + rel.Namespace + "/" + key + ": " + err.Error() + ")"), nil
	}
	values, err := releaseConfig(sec.Data["release"])
	if err != nil {
		return fromSpec("the release's values could not be decoded (" + err.Error() + ")"), nil
	}
	return ui.HelmValues{From: "release", Release: rel.Namespace + "/" + rel.Name, Revision: rel.Revision, Values: values}, nil
}

// releaseConfig decodes Helm's stored release and returns its values.
func releaseConfig(data []byte) (map[string]any, error) {
	raw, err := base64.StdEncoding.DecodeString(string(data))
	if err != nil {
		return nil, err
	}
	if bytes.HasPrefix(raw, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			return nil, err
		}
		if raw, err = io.ReadAll(io.LimitReader(zr, maxReleaseJSON)); err != nil {
			return nil, err
		}
	}
	var r struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, err
	}
	if r.Config == nil {
		r.Config = map[string]any{}
	}
	return r.Config, nil
}

func componentIndex(env *v1alpha1.DevEnvironment, name string) int {
	for i, c := range env.Spec.Components {
		if c.Name == name {
			return i
		}
	}
	return -1
}
