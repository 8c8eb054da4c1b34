package teamcache

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/fields"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/reviewguard"
)

// Extra keys of a pod-bound ServiceAccount token's user, as TokenReview
// reports them.
const (
	extraPodName = "authentication.kubernetes.io/pod-name"
	extraPodUID  = "authentication.kubernetes.io/pod-uid"
)

// errUnauthenticated is a token the API server does not accept for the
// cache's audience, or one not bound to a builder pod of an environment
// run as that environment's ServiceAccount.
var errUnauthenticated = errors.New("not a builder pod's token")

// caller is what a builder pod may do: write Own, read Own then ReadFrom.
type caller struct {
	Own      Env
	ReadFrom []Env
	at       time.Time
}

// callers remembers who a token is for a short while: a build asks the
// cache thousands of times, and each answer would otherwise cost a
// TokenReview, a pod and an environment read and a review per readFrom.
// A revoked right is therefore honoured within callerTTL.
type callers struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]caller
	// guard answers tokens refused moments ago, and sources asking for
	// too many reviews, before a review (the Listener asks it).
	guard reviewguard.Guard
}

// known says whether token is a caller identified within callerTTL: its
// requests cost no review and pass the guard.
func (c *callers) known(token string) bool {
	_, ok := c.get(token, time.Now())
	return ok
}

const (
	callerTTL  = 30 * time.Second
	maxCallers = 1024
)

func (c *callers) get(token string, now time.Time) (caller, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	got, ok := c.m[sha256.Sum256([]byte(token))]
	if !ok || now.Sub(got.at) > callerTTL {
		return caller{}, false
	}
	return got, true
}

func (c *callers) put(token string, who caller) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= maxCallers {
		c.m = map[[sha256.Size]byte]caller{}
	}
	c.m[sha256.Sum256([]byte(token))] = who
}

// identify maps a token to the environment whose builder pod holds it:
//
//  1. TokenReview for the cache's audience only, so no other token of the
//     pod (nor a user's) is accepted, and the token must be bound to a pod;
//  2. that pod (by name and UID) carries the environment label and runs
//     as the token's ServiceAccount;
//  3. the environment acts as that same ServiceAccount.
//
// The environments it may read are then checked (CheckReadFrom) as that
// ServiceAccount.
func (s *Server) identify(ctx context.Context, token string) (caller, error) {
	now := time.Now()
	if who, ok := s.callers.get(token, now); ok {
		return who, nil
	}
	user, ok, err := s.Reviewer.Authenticate(ctx, token, []string{s.Audience})
	if err != nil {
		return caller{}, err
	}
	if !ok {
		// Only the API server's own refusal is remembered: a pod or an
		// environment not found yet may be found a moment later.
		s.callers.guard.Refused(token)
		return caller{}, errUnauthenticated
	}
	ns, sa, ok := splitServiceAccount(user.Username)
	podName, podUID := first(user.Extra[extraPodName]), first(user.Extra[extraPodUID])
	if !ok || podName == "" || podUID == "" {
		return caller{}, errUnauthenticated
	}
	// A list by name: the operator may list and watch pods, not get them.
	var list corev1.PodList
	if err := s.Reader.List(ctx, &list, client.InNamespace(ns),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", podName)}); err != nil {
		return caller{}, err
	}
	if len(list.Items) != 1 || string(list.Items[0].UID) != podUID {
		return caller{}, errUnauthenticated
	}
	pod := &list.Items[0]
	envName := pod.Labels[v1alpha1.LabelEnvironment]
	if envName == "" || pod.Spec.ServiceAccountName != sa {
		return caller{}, errUnauthenticated
	}
	var env v1alpha1.DevEnvironment
	if err := s.Reader.Get(ctx, client.ObjectKey{Namespace: ns, Name: envName}, &env); err != nil {
		if apierrors.IsNotFound(err) {
			return caller{}, errUnauthenticated
		}
		return caller{}, err
	}
	if env.ServiceAccount(s.DefaultServiceAccount) != sa {
		return caller{}, errUnauthenticated
	}
	from, err := CheckReadFrom(ctx, s.Reviewer, &env, sa)
	var refused *ReadRefusedError
	if errors.As(err, &refused) {
		// The reconcile stalls the environment on it; its builds still use
		// their own cache.
		s.Log.V(1).Info("build cache read refused", "environment", env.Namespace+"/"+env.Name, "reason", err.Error())
		from, err = nil, nil
	}
	if err != nil {
		return caller{}, err
	}
	who := caller{Own: Env{Namespace: ns, Name: env.Name}, ReadFrom: from, at: now}
	s.callers.put(token, who)
	return who, nil
}

func splitServiceAccount(user string) (ns, sa string, ok bool) {
	rest, ok := strings.CutPrefix(user, "system:serviceaccount:")
	if !ok {
		return "", "", false
	}
	ns, sa, ok = strings.Cut(rest, ":")
	return ns, sa, ok && ns != "" && sa != ""
}

func first(v []string) string {
	if len(v) == 0 {
		return ""
	}
	return v[0]
}

// describe is a short description of a caller, for logs.
func (c caller) describe() string {
	return fmt.Sprintf("%s (reads %v)", c.Own, c.ReadFrom)
}
