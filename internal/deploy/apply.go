package deploy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/fault"
)

// FieldManager is the server-side apply field manager of writes without
// an owner (ApplyOptions.Owner empty: tests of the mechanics alone). It is
// also the manager every environment shared before each got its own
// (FieldManagerFor); Apply migrates what that shared manager owns to the
// environment's manager (see migrateLegacyManager).
const FieldManager = "devloop"

// maxFieldManager is the API server's limit on a field manager's length.
const maxFieldManager = 128

// FieldManagerFor is the server-side apply field manager of one
// environment, "devloop/<namespace>/<name>": two environments never share
// one, so neither can take fields over from the other by force, and an
// object's managedFields say which environment set what. Names too long
// for the API server's 128 characters keep a prefix and end in a hash of
// the whole owner.
func FieldManagerFor(owner string) string {
	m := FieldManager + "/" + owner
	if len(m) <= maxFieldManager {
		return m
	}
	sum := sha256.Sum256([]byte(owner))
	suffix := "-" + hex.EncodeToString(sum[:])[:16]
	return m[:maxFieldManager-len(suffix)] + suffix
}

// fieldManager is the manager of opts' writes.
func (o ApplyOptions) fieldManager() string {
	if o.Owner == "" {
		return FieldManager
	}
	return FieldManagerFor(o.Owner)
}

// Every applied object carries the environment's and component's labels
// and the owner annotation (v1alpha1.LabelEnvironment, LabelComponent,
// AnnotationOwner; setOwnerLabels). Prune deletes only objects that carry
// the environment's label, so a Namespace (or anything else) that existed
// before devloop applied it is never deleted.

// DefaultEstablishTimeout bounds the wait for applied CRDs to be served.
const DefaultEstablishTimeout = 30 * time.Second

// ApplyOptions say who applies.
type ApplyOptions struct {
	// Environment is the value of v1alpha1.LabelEnvironment: a label
	// value that identifies the DevEnvironment (the engine's choice, e.g. its name).
	Environment string
	// Component is the value of v1alpha1.LabelComponent.
	Component string
	// Owner is the value of v1alpha1.AnnotationOwner:
	// "<namespace>/<name>" of the environment. Empty leaves ownership to
	// the label (tests of the mechanics alone).
	Owner string
	// Known reports objects this environment applied before (its
	// inventory); any other object that exists already is taken over only
	// with Adopt.
	Known func(ObjRef) bool
	// Adopt takes over existing objects that another owner created
	// (spec.components[].manifests.adopt).
	Adopt bool
	// EstablishTimeout bounds the wait for CRDs; DefaultEstablishTimeout
	// when zero.
	EstablishTimeout time.Duration
	// Replaced, when set, is told each object that was deleted and
	// created again because a field that cannot change did (a Job's pod
	// template).
	Replaced func(ObjRef)
	// CRDApplied, when set, is told each CRD applied: the engine's Helm
	// discoveries must see the new kind (helm.Releases.CRDApplied).
	CRDApplied func()
}

// Apply server-side applies objs with c (which may impersonate the
// environment's ServiceAccount) under the environment's own field manager
// (FieldManagerFor), forcing ownership of
// conflicting fields: Namespaces first, then CRDs, waiting until they are
// Established so their custom resources can be applied, then the rest in a
// dependency-friendly kind order (RBAC and config before workloads,
// webhooks last). objs are not modified. It returns the inventory of what
// was applied — on an error, of what was applied before it. Re-applying
// unchanged objects writes nothing.
//
// To never lose track of an object when the process dies half-way,
// record Union(old, NewInventory(objs)) before calling it; to not keep
// objects that were never created, narrow it to Union(old, returned)
// when it fails.
func Apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, opts ApplyOptions) (Inventory, error) {
	for _, v := range []string{opts.Environment, opts.Component} {
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 || v == "" {
			return Inventory{}, fault.Permanentf("label value %q: %s", v, strings.Join(errs, "; "))
		}
	}
	applied := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		applied = append(applied, o.DeepCopy())
	}
	slices.SortStableFunc(applied, func(a, b *unstructured.Unstructured) int { return applyRank(a) - applyRank(b) })

	var crds []*unstructured.Unstructured // applied, not yet known Established
	var done []*unstructured.Unstructured // applied so far
	for _, o := range applied {
		if applyRank(o) > rankCRD && len(crds) > 0 {
			if err := waitEstablished(ctx, c, crds, opts.establishTimeout()); err != nil {
				return NewInventory(done), err
			}
			crds = nil
		}
		if err := applyOne(ctx, c, o, opts); err != nil {
			return NewInventory(done), err
		}
		done = append(done, o)
		if isCRD(o) {
			crds = append(crds, o)
			if opts.CRDApplied != nil {
				opts.CRDApplied()
			}
		}
	}
	if len(crds) > 0 {
		if err := waitEstablished(ctx, c, crds, opts.establishTimeout()); err != nil {
			return NewInventory(done), err
		}
	}
	return NewInventory(applied), nil
}

// applyOne labels and applies one object; extra options (a dry run) are
// added to the apply. A Namespace that exists without
// this environment's label belongs to someone else: it is applied without
// devloop's labels so that Prune never deletes it.
func applyOne(ctx context.Context, c client.Client, o *unstructured.Unstructured, opts ApplyOptions, extra ...client.ApplyOption) error {
	own, err := checkOwner(ctx, c, o, opts, len(extra) > 0)
	if err != nil {
		return err
	}
	if own {
		setOwnerLabels(o, opts)
	}
	// Apply sends the whole object: server-managed fields must go.
	unstructured.RemoveNestedField(o.Object, "metadata", "resourceVersion")
	unstructured.RemoveNestedField(o.Object, "metadata", "managedFields")
	unstructured.RemoveNestedField(o.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(o.Object, "status")
	// A null that reached here after parsing (a patch's value) is no key
	// either: server-side apply refuses one the schema does not allow.
	helm.DropNulls(o.Object)
	ref := RefOf(o)
	applyOpts := append([]client.ApplyOption{client.FieldOwner(opts.fieldManager()), client.ForceOwnership}, extra...)
	err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), applyOpts...)
	// A kind whose CRD was just established may not be in the client's
	// discovery cache yet; the dynamic RESTMapper refreshes on a miss, so
	// one retry after a short pause is enough.
	if meta.IsNoMatchError(err) {
		time.Sleep(500 * time.Millisecond)
		err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), applyOpts...)
	}
	if isImmutable(err) && len(extra) == 0 && own {
		// Like Flux's force: an object whose spec cannot change (a Job's
		// pod template) is deleted and created again, but only one this
		// environment applied.
		if rerr := replace(ctx, c, o, opts); rerr != nil {
			return rerr
		}
		if opts.Replaced != nil {
			opts.Replaced(ref)
		}
		err = c.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), applyOpts...)
	}
	if err == nil && own && len(extra) == 0 {
		err = migrateLegacyManager(ctx, c, o, opts.fieldManager())
	}
	return classify(c, err, "patch", ref)
}

// replaceTimeout bounds the wait for a replaced object to be gone.
const replaceTimeout = 30 * time.Second

// replace deletes the object o names, if this environment owns it, and
// waits until it is gone so it can be created again.
func replace(ctx context.Context, c client.Client, o *unstructured.Unstructured, opts ApplyOptions) error {
	ref := RefOf(o)
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(o.GroupVersionKind())
	key := client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}
	if err := c.Get(ctx, key, existing); err != nil {
		return classify(c, client.IgnoreNotFound(err), "get", ref)
	}
	if existing.GetLabels()[v1alpha1.LabelEnvironment] != opts.Environment {
		return fault.Permanentf("%s has a field that cannot change, and it was not applied by this environment: delete it to let devloop create it", describe(c, ref))
	}
	uid := existing.GetUID()
	err := c.Delete(ctx, existing, client.PropagationPolicy(metav1.DeletePropagationBackground), client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) {
		return classify(c, err, "delete", ref)
	}
	deadline := time.Now().Add(replaceTimeout)
	for {
		err := c.Get(ctx, key, existing)
		if apierrors.IsNotFound(err) || (err == nil && existing.GetUID() != uid) {
			return nil
		}
		if err != nil {
			return classify(c, err, "get", ref)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("replacing %s: still there %s after deleting it", describe(c, ref), replaceTimeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// isImmutable reports an Invalid answer naming a field that cannot
// change.
func isImmutable(err error) bool {
	return apierrors.IsInvalid(err) && strings.Contains(err.Error(), "field is immutable")
}

// Label sets the environment and component labels Apply sets, for objects
// another tool applies (a Helm release's, through its post-renderer): the
// same labels select them, and a drift check compares like with like.
func Label(objs []*unstructured.Unstructured, opts ApplyOptions) {
	for _, o := range objs {
		setOwnerLabels(o, opts)
	}
}

func setOwnerLabels(o *unstructured.Unstructured, opts ApplyOptions) {
	labels := o.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[v1alpha1.LabelEnvironment] = opts.Environment
	labels[v1alpha1.LabelComponent] = opts.Component
	o.SetLabels(labels)
	if opts.Owner != "" {
		annotations := o.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[v1alpha1.AnnotationOwner] = opts.Owner
		o.SetAnnotations(annotations)
	}
}

// ownedBy reports whether this environment created o: its owner
// annotation names it, or (objects applied before the annotation existed)
// there is none and the label names it.
func ownedBy(o metav1.Object, opts ApplyOptions) bool {
	if owner, ok := o.GetAnnotations()[v1alpha1.AnnotationOwner]; ok && opts.Owner != "" {
		return owner == opts.Owner
	}
	return o.GetLabels()[v1alpha1.LabelEnvironment] == opts.Environment
}

// checkOwner decides whether o may be applied as this environment's: an
// object that does not exist, or that it created, is; an existing
// Namespace someone else created is applied without devloop's labels (it
// is shared, and never pruned); any other existing object is refused,
// naming its owner, unless opts.Adopt — devloop never takes over what it
// did not create, and so never prunes it. Objects in opts.Known and dry
// runs (the drift check) skip the read.
func checkOwner(ctx context.Context, c client.Client, o *unstructured.Unstructured, opts ApplyOptions, dryRun bool) (bool, error) {
	ref := RefOf(o)
	namespace := o.GetKind() == "Namespace" && o.GroupVersionKind().Group == ""
	if !namespace && (dryRun || opts.Owner == "" || (opts.Known != nil && opts.Known(ref))) {
		return true, nil
	}
	existing := &unstructured.Unstructured{}
	existing.SetGroupVersionKind(o.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKey{Namespace: o.GetNamespace(), Name: o.GetName()}, existing)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case apierrors.IsForbidden(err):
		// The ServiceAccount may not read it: the apply that follows says
		// what it may not do (the check guards devloop's own judgement,
		// not the ServiceAccount's rights, which are its own).
		return true, nil
	case err != nil:
		return false, classify(c, err, "get", ref)
	case ownedBy(existing, opts):
		return true, nil
	case namespace:
		return false, nil
	case opts.Adopt:
		return true, nil
	}
	return false, fault.Permanentf("%s already exists and belongs to %s: devloop does not take over what it did not create (delete it, or set adopt: true on the component's manifests to take it over)", describe(c, ref), ownerOf(existing))
}

// ownerOf names, for messages, who created an existing object that this
// environment does not own.
func ownerOf(existing *unstructured.Unstructured) string {
	if other := existing.GetAnnotations()[v1alpha1.AnnotationOwner]; other != "" {
		return "DevEnvironment " + other
	}
	if other := existing.GetLabels()[v1alpha1.LabelEnvironment]; other != "" {
		return "DevEnvironment " + other
	}
	return "no DevEnvironment (created outside devloop)"
}

func (o ApplyOptions) establishTimeout() time.Duration {
	if o.EstablishTimeout > 0 {
		return o.EstablishTimeout
	}
	return DefaultEstablishTimeout
}

// waitEstablished polls until every CRD is Established. NamesAccepted
// false (a name clash with another CRD) will not resolve by waiting.
func waitEstablished(ctx context.Context, c client.Client, crds []*unstructured.Unstructured, timeout time.Duration) error {
	var pending string
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		for _, o := range crds {
			// Read as unstructured: the client's scheme need not know CRDs.
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
			if err := c.Get(ctx, client.ObjectKey{Name: o.GetName()}, u); err != nil {
				return false, classify(c, err, "get", RefOf(o))
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, crd); err != nil {
				return false, err
			}
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.NamesAccepted && cond.Status == apiextensionsv1.ConditionFalse {
					return false, fault.Permanentf("CustomResourceDefinition %s: names not accepted: %s", o.GetName(), cond.Message)
				}
			}
			if !crdEstablished(crd) {
				pending = o.GetName()
				return false, nil
			}
		}
		return true, nil
	})
	if wait.Interrupted(err) && ctx.Err() == nil {
		return fault.Unavailablef("CustomResourceDefinition %s not Established after %s", pending, timeout)
	}
	return err
}

func crdEstablished(crd *apiextensionsv1.CustomResourceDefinition) bool {
	for _, cond := range crd.Status.Conditions {
		if cond.Type == apiextensionsv1.Established {
			return cond.Status == apiextensionsv1.ConditionTrue
		}
	}
	return false
}

// Ranks of applyRank.
const (
	rankNamespace = iota
	rankCRD
	rankSetup    // what workloads refer to
	rankDefault  // workloads, custom resources, everything else
	rankWebhooks // admission and API services, once their backends exist
)

// applyRank orders kinds so that what others refer to exists first, in the
// spirit of Helm's install order.
func applyRank(o *unstructured.Unstructured) int {
	switch o.GetKind() {
	case "Namespace":
		return rankNamespace
	case "CustomResourceDefinition":
		return rankCRD
	case "ServiceAccount", "Secret", "ConfigMap", "StorageClass", "PersistentVolume", "PersistentVolumeClaim",
		"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding", "PriorityClass", "ResourceQuota", "LimitRange",
		"NetworkPolicy", "Service":
		return rankSetup
	case "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
		"ValidatingAdmissionPolicyBinding", "APIService":
		return rankWebhooks
	}
	return rankDefault
}

// resourceName is the plural resource of ref as kubectl and RBAC name it,
// e.g. deployments.apps; the lowercased kind when discovery does not know it.
// c is any client; those with a RESTMapper (client.Client) give plurals.
func resourceName(c any, ref ObjRef) string {
	res := strings.ToLower(ref.Kind)
	if mc, ok := c.(interface{ RESTMapper() meta.RESTMapper }); ok && mc.RESTMapper() != nil {
		if m, err := mc.RESTMapper().RESTMapping(ref.GroupVersionKind().GroupKind(), ref.Version); err == nil {
			res = m.Resource.Resource
		}
	}
	if ref.Group != "" {
		res += "." + ref.Group
	}
	return res
}

// describe is "deployments.apps/web" for messages.
func describe(c any, ref ObjRef) string {
	return fmt.Sprintf("%s/%s", resourceName(c, ref), ref.Name)
}
