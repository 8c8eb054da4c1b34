package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// fieldManager owns what `secret` and `settings` write (server-side apply):
// keys this command wrote before and does not write now are removed; keys
// another manager wrote stay.
const fieldManager = "kubectl-devloop"

// maxObjectData is what the API server takes in one Secret or ConfigMap.
const maxObjectData = 1 << 20

// localObject is a Secret or ConfigMap made from local files, environment
// variables, literals or a docker config. Its data never leaves this
// process except in the write to the API server.
type localObject struct {
	writtenObject
	data  map[string][]byte
	notes []string // names, never values: "registries: a, b"
}

func newLocalObject(kind, name string, secretType corev1.SecretType, data map[string][]byte, notes ...string) (*localObject, error) {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return nil, fmt.Errorf("NAME %q is not a valid %s name: %s", name, kind, strings.Join(errs, "; "))
	}
	size := 0
	for k, v := range data {
		size += len(k) + len(v)
	}
	if size > maxObjectData {
		return nil, fmt.Errorf("%s/%s would hold %s; the API server takes at most 1 MiB in one %s", strings.ToLower(kind), name, humanBytes(int64(size)), kind)
	}
	keys := slices.Sorted(maps.Keys(data))
	return &localObject{writtenObject: writtenObject{kind: kind, name: name, secretType: secretType, keys: keys}, data: data, notes: notes}, nil
}

// writeObject applies o in the namespace of the current context, labelled
// for the environment envName, says which fields of the environment use
// it (or warns that none does), and asks the environment to reconcile
// when what it reads changed: the operator does not watch Secrets and
// ConfigMaps (it may not even read Secrets, only the environment's
// ServiceAccount may), so without the request a change would wait for the
// next reconcile for another reason.
func (a *app) writeObject(ctx context.Context, envName string, o *localObject, dryRun bool) error {
	s, env, err := a.connectFind(ctx, envName)
	if err != nil {
		return err
	}
	before, err := a.existing(ctx, s, envName, o)
	if err != nil {
		return err
	}
	opts := []client.ApplyOption{client.FieldOwner(fieldManager), client.ForceOwnership}
	if dryRun {
		opts = append(opts, client.DryRunAll)
	}
	labels := map[string]string{v1alpha1.LabelEnvironment: v1alpha1.LabelValue(envName)}
	var after string
	switch o.kind {
	case "Secret":
		ac := corev1ac.Secret(o.name, s.namespace).WithLabels(labels).WithType(o.secretType).WithData(o.data)
		err = s.client.Apply(ctx, ac, opts...)
		after = resourceVersion(ac.ObjectMetaApplyConfiguration)
	default:
		text := map[string]string{}
		for k, v := range o.data {
			text[k] = string(v)
		}
		ac := corev1ac.ConfigMap(o.name, s.namespace).WithLabels(labels).WithData(text)
		err = s.client.Apply(ctx, ac, opts...)
		after = resourceVersion(ac.ObjectMetaApplyConfiguration)
	}
	if err != nil {
		// The API server's message names fields, never data values.
		return fmt.Errorf("writing %s in namespace %q: %w", o, s.namespace, err)
	}

	summary := fmt.Sprintf("%s in namespace %s: keys %s", o, s.namespace, strings.Join(o.keys, ", "))
	if o.secretType != "" {
		summary += " (" + string(o.secretType) + ")"
	}
	changed := before != after
	switch {
	case dryRun:
		if err := printRedacted(a, s.namespace, labels, o); err != nil {
			return err
		}
		fmt.Fprintf(a.out(), "# dry run: %s accepted by the API server, nothing written\n", o)
	case before == "":
		fmt.Fprintln(a.out(), "created", summary)
	case changed:
		fmt.Fprintln(a.out(), "configured", summary)
	default:
		fmt.Fprintln(a.out(), "unchanged", summary)
	}
	if !dryRun {
		for _, n := range o.notes {
			fmt.Fprintln(a.out(), "  "+n)
		}
	}

	if env == nil {
		fmt.Fprintf(a.errOut(), "Warning: devenvironment %q does not exist in namespace %q (yet): nothing reads %s until an environment names it\n", envName, s.namespace, o)
		return nil
	}
	uses, warnings := usage(env, o.writtenObject)
	for _, w := range warnings {
		fmt.Fprintln(a.errOut(), "Warning:", w)
	}
	if len(uses) == 0 {
		return nil
	}
	fmt.Fprintf(a.out(), "used by devenvironment/%s: %s\n", envName, strings.Join(uses, ", "))
	if !changed || dryRun {
		return nil
	}
	if _, err := requestReconcile(ctx, s, env, nil); err != nil {
		return err
	}
	fmt.Fprintf(a.out(), "asked devenvironment/%s to reconcile\n", envName)
	return nil
}

// existing reads the object as it is now and returns its resourceVersion
// ("" when it does not exist). A Secret's type cannot change, so a Secret
// of another type is refused with what to do; a Secret labelled for
// another environment is taken over with a warning.
func (a *app) existing(ctx context.Context, s *session, envName string, o *localObject) (string, error) {
	key := client.ObjectKey{Namespace: s.namespace, Name: o.name}
	var cur client.Object = &corev1.ConfigMap{}
	if o.kind == "Secret" {
		cur = &corev1.Secret{}
	}
	if err := s.client.Get(ctx, key, cur); apierrors.IsNotFound(err) {
		return "", nil
	} else if err != nil {
		return "", fmt.Errorf("reading %s in namespace %q: %w", o, s.namespace, err)
	}
	if sec, ok := cur.(*corev1.Secret); ok && sec.Type != o.secretType {
		return "", fmt.Errorf("%s exists with type %s, and a Secret's type cannot change to %s: delete it first (kubectl delete secret %s -n %s) or pick another NAME",
			o, sec.Type, o.secretType, o.name, s.namespace)
	}
	if other := cur.GetLabels()[v1alpha1.LabelEnvironment]; other != "" && other != v1alpha1.LabelValue(envName) {
		fmt.Fprintf(a.errOut(), "Warning: %s was labelled for devenvironment %s; it is now labelled for %s\n", o, other, envName)
	}
	return cur.GetResourceVersion(), nil
}

func resourceVersion(m *metav1ac.ObjectMetaApplyConfiguration) string {
	if m == nil || m.ResourceVersion == nil {
		return ""
	}
	return *m.ResourceVersion
}

// printRedacted prints the object as YAML with every value replaced by
// its size.
func printRedacted(a *app, namespace string, labels map[string]string, o *localObject) error {
	data := map[string]string{}
	for k, v := range o.data {
		data[k] = fmt.Sprintf("<redacted: %d bytes>", len(v))
	}
	obj := map[string]any{
		"apiVersion": "v1",
		"kind":       o.kind,
		"metadata":   map[string]any{"name": o.name, "namespace": namespace, "labels": labels},
		"data":       data,
	}
	if o.secretType != "" {
		obj["type"] = string(o.secretType)
	}
	out, err := yaml.Marshal(obj)
	if err != nil {
		return err
	}
	a.out().Write(out)
	for _, n := range o.notes {
		fmt.Fprintln(a.out(), "# "+n)
	}
	return nil
}
