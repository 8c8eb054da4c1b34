package cli

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/ui"
)

// maxEndpoints bounds the Service ports one component lists.
const maxEndpoints = 20

// Endpoints are the ports of the Services in front of a component's
// pods (a Service whose selector picks one of them, or one the component
// applied), so the page offers a port-forward without a hand-declared
// components[].ports entry. A port the spec declares already is left out.
// Everything is read as the user.
func (u *uiActions) Endpoints(ctx context.Context, namespace, name, component string) ([]ui.Endpoint, error) {
	s := u.in(namespace)
	env, err := s.getEnv(ctx, name)
	if err != nil {
		return nil, err
	}
	return u.endpointsOf(ctx, s, env, component)
}

func (u *uiActions) endpointsOf(ctx context.Context, s *session, env *v1alpha1.DevEnvironment, component string) ([]ui.Endpoint, error) {
	c := env.Spec.Component(component)
	if c == nil {
		return nil, fmt.Errorf("devenvironment/%s has no component %q", env.Name, component)
	}
	pods, err := u.a.targetPods(ctx, s, env, &logsTarget{what: "component " + component, component: component})
	if err != nil {
		return nil, err
	}
	applied := map[string]bool{}
	namespaces := map[string]bool{}
	for _, p := range pods {
		namespaces[p.Namespace] = true
	}
	if st := env.Status.Component(component); st != nil {
		objs, _ := st.OwnedObjects()
		for _, r := range objs {
			if r.Kind == "Service" && r.Group == "" {
				ns := r.Namespace
				if ns == "" {
					ns = env.Namespace
				}
				applied[ns+"/"+r.Name] = true
				namespaces[ns] = true
			}
		}
	}
	declared := map[string]bool{}
	for _, p := range c.Ports {
		if t, err := parseForwardTarget(p.Target); err == nil {
			declared[t.String()] = true
		}
	}
	var out []ui.Endpoint
	for ns := range namespaces {
		var svcs corev1.ServiceList
		if err := s.client.List(ctx, &svcs, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for _, svc := range svcs.Items {
			if !applied[ns+"/"+svc.Name] && !selectsAny(svc.Spec.Selector, pods) {
				continue
			}
			for _, p := range svc.Spec.Ports {
				if p.Protocol != "" && p.Protocol != corev1.ProtocolTCP {
					continue
				}
				id := "svc/" + svc.Name + ":" + strconv.Itoa(int(p.Port))
				if declared[id] {
					continue
				}
				out = append(out, ui.Endpoint{ID: id, Namespace: ns, Service: svc.Name, Port: p.Port, Name: p.Name})
			}
		}
	}
	slices.SortFunc(out, func(a, b ui.Endpoint) int {
		if a.Namespace+a.ID < b.Namespace+b.ID {
			return -1
		}
		return 1
	})
	if len(out) > maxEndpoints {
		out = out[:maxEndpoints]
	}
	return out, nil
}

// selectsAny says whether a Service's selector picks one of the pods (an
// empty selector picks none: such a Service has hand-made endpoints).
func selectsAny(selector map[string]string, pods []corev1.Pod) bool {
	if len(selector) == 0 {
		return false
	}
	sel := labels.SelectorFromSet(selector)
	for _, p := range pods {
		if sel.Matches(labels.Set(p.Labels)) {
			return true
		}
	}
	return false
}

// endpointForwarder is the forwarder of a port Endpoints found, named
// by its ID (svc/NAME:PORT): only a Service port of the component is
// forwarded, not any the page names.
func (u *uiActions) endpointForwarder(ctx context.Context, s *session, env *v1alpha1.DevEnvironment, component, id string) (*forwarder, error) {
	eps, err := u.endpointsOf(ctx, s, env, component)
	if err != nil {
		return nil, err
	}
	for _, e := range eps {
		if e.ID == id {
			t, err := parseForwardTarget(id)
			if err != nil {
				return nil, err
			}
			return &forwarder{name: id, component: component, namespace: e.Namespace, target: t}, nil
		}
	}
	return nil, fmt.Errorf("component %s has no Service port %s in front of its pods", component, id)
}
