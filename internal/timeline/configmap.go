package timeline

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// The timeline's ConfigMap: one per environment, in its namespace, owned
// by it (garbage-collected with it) and labelled so that a reader lists
// and watches every environment's timeline with one selector.
const (
	// NamePrefix + the environment's name is the ConfigMap's name (see
	// ConfigMapName for names too long for it).
	NamePrefix = "devloop-changes-"
	// Role is the value of v1alpha1.LabelRole on the ConfigMap.
	Role = "change-timeline"
	// DataKey holds the changes as JSON, newest first.
	DataKey = "changes.json"
)

// maxData bounds what is parsed of a timeline ConfigMap: MaxChanges of
// MaxSteps steps need far less, and the object is the tenant's to edit.
const maxData = 256 << 10

// ConfigMapName is the timeline ConfigMap's name for environment env:
// NamePrefix+env, or, when that is longer than an object name may be, a
// cut of it and a hash of env.
func ConfigMapName(env string) string {
	name := NamePrefix + env
	if len(name) <= validation.DNS1123SubdomainMaxLength {
		return name
	}
	sum := sha256.Sum256([]byte(env))
	tail := "-" + hex.EncodeToString(sum[:4])
	return name[:validation.DNS1123SubdomainMaxLength-len(tail)] + tail
}

// Labels are the timeline ConfigMap's labels.
func Labels(env *v1alpha1.DevEnvironment) map[string]string {
	return map[string]string{v1alpha1.LabelEnvironment: v1alpha1.LabelValue(env.Name), v1alpha1.LabelRole: Role}
}

// Decode reads a timeline ConfigMap's changes, bounded: oversized or
// malformed data is an error, and no more than MaxChanges of MaxSteps
// steps are kept.
func Decode(cm *corev1.ConfigMap) ([]Change, error) {
	data := cm.Data[DataKey]
	if data == "" {
		return nil, nil
	}
	if len(data) > maxData {
		return nil, fmt.Errorf("%s is %d bytes, more than %d", DataKey, len(data), maxData)
	}
	var changes []Change
	if err := json.Unmarshal([]byte(data), &changes); err != nil {
		return nil, fmt.Errorf("reading %s: %w", DataKey, err)
	}
	if len(changes) > MaxChanges {
		changes = changes[:MaxChanges]
	}
	for i := range changes {
		if len(changes[i].Steps) > MaxSteps {
			changes[i].Steps = changes[i].Steps[:MaxSteps]
		}
	}
	return changes, nil
}

// ErrForeign is returned when a ConfigMap under the timeline's name is not
// the environment's: it is left alone, and the timeline is not written.
var ErrForeign = errors.New("not controlled by the environment")

// Load reads env's timeline once per process, through c (the tenant), so
// that a restarted operator goes on with the history written before: the
// changes found are kept after those begun since. It is one GET per
// environment after a start, and nothing after. A ConfigMap of the name
// the environment does not control is ErrForeign, once: it is never
// written.
func (r *Recorder) Load(ctx context.Context, c client.Client, env *v1alpha1.DevEnvironment) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	loaded := r.env(env.UID).loaded
	r.mu.Unlock()
	if loaded {
		return nil
	}
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: ConfigMapName(env.Name)}, cm)
	var found []Change
	foreign := false
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case !metav1.IsControlledBy(cm, env):
		foreign = true
	default:
		// A timeline that cannot be read is started again rather than
		// left unwritten for good.
		found, _ = Decode(cm)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.env(env.UID)
	t.loaded, t.foreign = true, foreign
	t.changes = merge(t.changes, found)
	if foreign {
		t.told = true
		return fmt.Errorf("configmap %s/%s: %w", env.Namespace, cm.Name, ErrForeign)
	}
	return nil
}

// merge puts the changes begun in memory before those read back, dropping
// what both hold, bounded to MaxChanges.
func merge(mem, read []Change) []Change {
	out := append([]Change(nil), mem...)
	for _, c := range read {
		dup := false
		for _, m := range mem {
			dup = dup || (m.Source == c.Source && m.Revision == c.Revision)
		}
		if !dup {
			out = append(out, c)
		}
	}
	if len(out) > MaxChanges {
		out = out[:MaxChanges]
	}
	return out
}

// Flush writes env's timeline through c (the tenant) when it changed
// since the last write, and does nothing otherwise: a steady environment
// costs no write. The ConfigMap is created owned by env; one of that name
// env does not control is never adopted (ErrForeign, said once; looked at
// again, one read, only when the timeline changes, so the timeline is
// written once it is gone). A failed write is tried again at the next
// flush.
func (r *Recorder) Flush(ctx context.Context, c client.Client, env *v1alpha1.DevEnvironment) error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	t, ok := r.envs[env.UID]
	if !ok || !t.dirty || !t.loaded {
		r.mu.Unlock()
		return nil
	}
	data, err := json.Marshal(t.changes)
	r.mu.Unlock()
	if err != nil {
		return err
	}
	err = write(ctx, c, env, string(data))
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case errors.Is(err, ErrForeign):
		// Said once; written again only if it goes away.
		t.foreign, t.dirty = true, false
		if t.told {
			return nil
		}
		t.told = true
	case err == nil:
		t.foreign, t.told = false, false
		// Changes recorded while writing are written next time: dirty
		// is cleared only if nothing moved meanwhile.
		if now, _ := json.Marshal(t.changes); string(now) == string(data) {
			t.dirty = false
		}
	}
	return err
}

// write creates or updates the ConfigMap with data.
func write(ctx context.Context, c client.Client, env *v1alpha1.DevEnvironment, data string) error {
	name := ConfigMapName(env.Name)
	cm := &corev1.ConfigMap{}
	err := c.Get(ctx, types.NamespacedName{Namespace: env.Namespace, Name: name}, cm)
	switch {
	case apierrors.IsNotFound(err):
		cm = &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: env.Namespace, Labels: Labels(env),
				OwnerReferences: []metav1.OwnerReference{env.ControllerRef()}},
			Data: map[string]string{DataKey: data},
		}
		return c.Create(ctx, cm)
	case err != nil:
		return err
	case !metav1.IsControlledBy(cm, env):
		return fmt.Errorf("configmap %s/%s: %w", env.Namespace, name, ErrForeign)
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	for k, v := range Labels(env) {
		cm.Labels[k] = v
	}
	cm.Data = map[string]string{DataKey: data}
	return c.Update(ctx, cm)
}
