package cli

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// workloadKinds are the kinds whose pods `logs` reads, by group.
var workloadKinds = map[string]bool{
	"apps/Deployment": true, "apps/StatefulSet": true, "apps/DaemonSet": true, "apps/ReplicaSet": true,
	"batch/Job": true, "/Pod": true,
}

// helmInstanceLabel is the label charts following Helm's conventions put
// on everything a release creates.
const helmInstanceLabel = "app.kubernetes.io/instance"

// targetPods lists the pods of a logs target.
func (a *app) targetPods(ctx context.Context, s *session, env *v1alpha1.DevEnvironment, t *logsTarget) ([]corev1.Pod, error) {
	if t.build != nil {
		return t.build.pods(ctx, s, env.Namespace)
	}
	if t.job != "" {
		return s.podsOf(ctx, env.Namespace, []v1alpha1.ObjectRef{{Group: "batch", Version: "v1", Kind: "Job", Namespace: env.Namespace, Name: t.job}})
	}
	st := env.Status.Component(t.component)
	if st == nil {
		return nil, fmt.Errorf("component %s has no status yet: the operator has not reached it (see `kubectl devloop status %s`)", t.component, env.Name)
	}
	// The operator records the release's workloads in status, so the
	// plugin need not read Helm's storage.
	objs, _ := st.OwnedObjects()
	pods, err := s.podsOf(ctx, env.Namespace, objs)
	if err != nil || len(pods) > 0 || st.Release == nil {
		return pods, err
	}
	// A chart whose workloads are not in the release manifest (made by an
	// operator it installs, say), or a release whose status records no
	// workloads (written by an older operator), still labels its pods by
	// convention.
	if len(objs) == 0 && !t.noted {
		t.noted = true
		fmt.Fprintf(a.errOut(), "note: status records no workloads of Helm release %s/%s; looking for pods labelled %s=%s\n", st.Release.Namespace, st.Release.Name, helmInstanceLabel, st.Release.Name)
	}
	list := &corev1.PodList{}
	if err := s.client.List(ctx, list, client.InNamespace(st.Release.Namespace), client.MatchingLabels{helmInstanceLabel: st.Release.Name}); err != nil {
		return nil, fmt.Errorf("listing pods of release %s: %w", st.Release.Name, err)
	}
	return list.Items, nil
}

// podsOf lists the pods of the workloads among objs (by each workload's
// selector), in name order without duplicates. Objects in no namespace
// default to ns.
func (s *session) podsOf(ctx context.Context, ns string, objs []v1alpha1.ObjectRef) ([]corev1.Pod, error) {
	seen := map[string]corev1.Pod{}
	for _, o := range objs {
		if !workloadKinds[o.Group+"/"+o.Kind] {
			continue
		}
		if o.Namespace == "" {
			o.Namespace = ns
		}
		if o.Version == "" {
			o.Version = "v1"
		}
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(schemaGroupVersion(o.Group, o.Version))
		u.SetKind(o.Kind)
		err := s.client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, u)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
		}
		if o.Kind == "Pod" {
			pod := corev1.Pod{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &pod); err != nil {
				return nil, err
			}
			seen[pod.Namespace+"/"+pod.Name] = pod
			continue
		}
		sel, err := selectorOf(u)
		if err != nil {
			return nil, fmt.Errorf("%s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
		}
		list := &corev1.PodList{}
		if err := s.client.List(ctx, list, client.InNamespace(o.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, fmt.Errorf("listing pods of %s %s/%s: %w", o.Kind, o.Namespace, o.Name, err)
		}
		for _, p := range list.Items {
			seen[p.Namespace+"/"+p.Name] = p
		}
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pods := make([]corev1.Pod, 0, len(keys))
	for _, k := range keys {
		pods = append(pods, seen[k])
	}
	return pods, nil
}

// selectorOf is a workload's spec.selector as a label selector.
func selectorOf(u *unstructured.Unstructured) (labels.Selector, error) {
	m, found, err := unstructured.NestedMap(u.Object, "spec", "selector")
	if err != nil || !found {
		return nil, fmt.Errorf("no spec.selector")
	}
	ls := &metav1.LabelSelector{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(m, ls); err != nil {
		return nil, err
	}
	sel, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, err
	}
	if sel.Empty() {
		return nil, fmt.Errorf("empty spec.selector")
	}
	return sel, nil
}

func schemaGroupVersion(group, version string) string {
	if group == "" {
		return version
	}
	return group + "/" + version
}
