package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/timeline"
)

// MaxEventsPerEnv bounds the events kept for one environment (newest).
const MaxEventsPerEnv = 30

// subscriberBuffer is how many updates a page may fall behind before it is
// dropped; its EventSource reconnects and starts from a fresh snapshot, so
// a slow tab costs a reload, never unbounded memory.
const subscriberBuffer = 512

// Scope is what the store watches: one namespace ("" for all the user
// can list cluster-wide) and an optional label selector on environments.
type Scope struct {
	Namespace string
	Selector  string
}

// Update is one change pushed to the pages: Kind is env, env-delete,
// events, timeline or problem; Key is namespace/name.
type Update struct {
	Kind string          `json:"kind"`
	Key  string          `json:"key"`
	Data json.RawMessage `json:"data,omitempty"`
}

// Store holds what the user can see, from one LIST and one WATCH per kind
// (DevEnvironments, their Events, the timeline ConfigMaps), and fans every
// change out to the subscribed pages.
type Store struct {
	scope Scope

	mu        sync.Mutex
	envs      map[string]json.RawMessage
	events    map[string][]EventView
	timelines map[string]json.RawMessage
	problems  map[string]string
	subs      map[chan Update]struct{}
	synced    []cache.InformerSynced
}

// NewStore starts watching with cfg (the user's credentials) until ctx ends.
func NewStore(ctx context.Context, cfg *rest.Config, scope Scope) (*Store, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	s := &Store{
		scope:     scope,
		envs:      map[string]json.RawMessage{},
		events:    map[string][]EventView{},
		timelines: map[string]json.RawMessage{},
		problems:  map[string]string{},
		subs:      map[chan Update]struct{}{},
	}
	envInformers := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, scope.Namespace, func(o *metav1.ListOptions) {
		o.LabelSelector = scope.Selector
	})
	envs := envInformers.ForResource(v1alpha1.GroupVersion.WithResource("devenvironments")).Informer()
	s.watch(envs, "devenvironments", s.onEnv, s.onEnvDelete)

	events := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(scope.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = "involvedObject.kind=DevEnvironment"
		}))
	s.watch(events.Core().V1().Events().Informer(), "events", s.onEvent, s.onEventDelete)

	timelines := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithNamespace(scope.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = v1alpha1.LabelRole + "=" + timeline.Role
		}))
	s.watch(timelines.Core().V1().ConfigMaps().Informer(), "configmaps", s.onTimeline, s.onTimelineDelete)

	envInformers.Start(ctx.Done())
	events.Start(ctx.Done())
	timelines.Start(ctx.Done())
	return s, nil
}

// watch registers the handlers and records a LIST or WATCH the API server
// refused (RBAC) as a problem the page shows, instead of failing silently.
func (s *Store) watch(inf cache.SharedIndexInformer, what string, upsert func(any), remove func(any)) {
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    upsert,
		UpdateFunc: func(_, obj any) { upsert(obj) },
		DeleteFunc: remove,
	})
	where := "all namespaces"
	if s.scope.Namespace != "" {
		where = "namespace " + s.scope.Namespace
	}
	_ = inf.SetWatchErrorHandlerWithContext(func(_ context.Context, _ *cache.Reflector, err error) {
		s.setProblem(what, fmt.Sprintf("cannot list/watch %s in %s: %s", what, where, bounded(err.Error(), 300)))
	})
	s.synced = append(s.synced, inf.HasSynced)
}

// WaitSynced waits until every kind has been listed once (or ctx ends).
func (s *Store) WaitSynced(ctx context.Context) bool {
	return cache.WaitForCacheSync(ctx.Done(), s.synced...)
}

func (s *Store) setProblem(what, msg string) {
	data, _ := json.Marshal(msg)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.problems[what] == msg {
		return
	}
	s.problems[what] = msg
	s.publish(Update{Kind: "problem", Key: what, Data: data})
}

func (s *Store) clearProblem(what string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.problems[what]; !ok {
		return
	}
	delete(s.problems, what)
	s.publish(Update{Kind: "problem", Key: what, Data: json.RawMessage(`""`)})
}

func (s *Store) onEnv(obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	env := &v1alpha1.DevEnvironment{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, env); err != nil {
		s.setProblem("decode", "cannot read devenvironment "+u.GetNamespace()+"/"+u.GetName()+": "+bounded(err.Error(), 200))
		return
	}
	s.clearProblem("devenvironments")
	data, err := json.Marshal(NewEnvView(env, time.Now()))
	if err != nil {
		return
	}
	key := env.Namespace + "/" + env.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	s.envs[key] = data
	s.publish(Update{Kind: "env", Key: key, Data: data})
}

func (s *Store) onEnvDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	m, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	key := m.GetNamespace() + "/" + m.GetName()
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.envs, key)
	s.publish(Update{Kind: "env-delete", Key: key})
}

// EventView is one Kubernetes Event of an environment.
type EventView struct {
	Type    string    `json:"type"`
	Reason  string    `json:"reason"`
	Message string    `json:"message"`
	Count   int32     `json:"count"`
	Last    time.Time `json:"last"`
	uid     string
}

// eventViewOf is what the page shows of an Event.
func eventViewOf(ev *corev1.Event) EventView {
	last := ev.LastTimestamp.Time
	if last.IsZero() {
		last = ev.EventTime.Time
	}
	if last.IsZero() {
		last = ev.CreationTimestamp.Time
	}
	// An Event written through events.k8s.io leaves the core count at 0
	// and counts repeats in its series; seen at all, it happened once.
	count := ev.Count
	if se := ev.Series; se != nil {
		if se.Count > count {
			count = se.Count
		}
		if se.LastObservedTime.After(last) {
			last = se.LastObservedTime.Time
		}
	}
	if count < 1 {
		count = 1
	}
	return EventView{Type: ev.Type, Reason: ev.Reason, Message: bounded(ev.Message, 1024), Count: count, Last: last, uid: string(ev.UID)}
}

func (s *Store) onEvent(obj any) {
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return
	}
	s.clearProblem("events")
	key := ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
	v := eventViewOf(ev)
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.events[key]
	kept := list[:0:0]
	for _, e := range list {
		if e.uid != v.uid {
			kept = append(kept, e)
		}
	}
	kept = append(kept, v)
	sort.SliceStable(kept, func(i, j int) bool { return kept[i].Last.After(kept[j].Last) })
	if len(kept) > MaxEventsPerEnv {
		kept = kept[:MaxEventsPerEnv]
	}
	s.events[key] = kept
	s.publishEvents(key)
}

func (s *Store) onEventDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	ev, ok := obj.(*corev1.Event)
	if !ok {
		return
	}
	key := ev.InvolvedObject.Namespace + "/" + ev.InvolvedObject.Name
	s.mu.Lock()
	defer s.mu.Unlock()
	list := s.events[key]
	kept := list[:0:0]
	for _, e := range list {
		if e.uid != string(ev.UID) {
			kept = append(kept, e)
		}
	}
	s.events[key] = kept
	s.publishEvents(key)
}

// publishEvents sends an environment's events; s.mu is held.
func (s *Store) publishEvents(key string) {
	data, _ := json.Marshal(s.events[key])
	s.publish(Update{Kind: "events", Key: key, Data: data})
}

func (s *Store) onTimeline(obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	key, ok := timelineKey(cm)
	if !ok {
		return
	}
	s.clearProblem("configmaps")
	// Decode bounds what is read: a tenant may edit the ConfigMap.
	changes, err := timeline.Decode(cm)
	if err != nil {
		changes = nil
	}
	data, _ := json.Marshal(changes)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.timelines[key] = data
	s.publish(Update{Kind: "timeline", Key: key, Data: data})
}

// timelineKey is the namespace/name of the environment whose timeline cm
// is: its controller, which must be a DevEnvironment under the name the
// operator gives that environment's timeline (timeline.ConfigMapName). A
// ConfigMap labelled like a timeline that no environment controls is not
// shown as one.
func timelineKey(cm *corev1.ConfigMap) (string, bool) {
	owner := metav1.GetControllerOf(cm)
	if owner == nil || owner.Kind != "DevEnvironment" || owner.APIVersion != v1alpha1.GroupVersion.String() {
		return "", false
	}
	if cm.Name != timeline.ConfigMapName(owner.Name) {
		return "", false
	}
	return cm.Namespace + "/" + owner.Name, true
}

func (s *Store) onTimelineDelete(obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	key, ok := timelineKey(cm)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.timelines, key)
	s.publish(Update{Kind: "timeline", Key: key, Data: json.RawMessage("[]")})
}

// publish hands u to every subscriber; s.mu is held. A subscriber whose
// buffer is full is dropped (its channel closed).
func (s *Store) publish(u Update) {
	for ch := range s.subs {
		select {
		case ch <- u:
		default:
			delete(s.subs, ch)
			close(ch)
		}
	}
}

// Subscribe returns everything the store holds now, as updates, and a
// channel of the changes after it; cancel unsubscribes.
func (s *Store) Subscribe() (snapshot []Update, changes <-chan Update, cancel func()) {
	ch := make(chan Update, subscriberBuffer)
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.problems {
		data, _ := json.Marshal(v)
		snapshot = append(snapshot, Update{Kind: "problem", Key: k, Data: data})
	}
	keys := make([]string, 0, len(s.envs))
	for k := range s.envs {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		snapshot = append(snapshot, Update{Kind: "env", Key: k, Data: s.envs[k]})
	}
	for k, v := range s.events {
		data, _ := json.Marshal(v)
		snapshot = append(snapshot, Update{Kind: "events", Key: k, Data: data})
	}
	for k, v := range s.timelines {
		snapshot = append(snapshot, Update{Kind: "timeline", Key: k, Data: v})
	}
	s.subs[ch] = struct{}{}
	return snapshot, ch, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if _, ok := s.subs[ch]; ok {
			delete(s.subs, ch)
			close(ch)
		}
	}
}

// bounded cuts s to n bytes, marking the cut.
func bounded(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
