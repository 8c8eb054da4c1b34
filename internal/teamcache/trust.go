package teamcache

import (
	"context"
	"fmt"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/identity"
	"github.com/devloop-dev/devloop/internal/registryauth"
)

// VerbReadCache is the verb on a DevEnvironment that lets a
// ServiceAccount's environment read its build cache (spec.cache.readFrom).
// It is a verb of its own, not get: get is in the built-in view role, and
// viewing an environment must not open its cache.
const VerbReadCache = "readcache"

// Reviewer is the API server's judgement: who a token is (TokenReview)
// and whether a ServiceAccount may read a DevEnvironment's build cache
// (SubjectAccessReview). KubeReviewer is the real one.
type Reviewer interface {
	Authenticate(ctx context.Context, token string, audiences []string) (user authnv1.UserInfo, ok bool, err error)
	MayReadCache(ctx context.Context, user string, env Env) (bool, error)
}

// KubeReviewer asks the API server as the operator (its ClusterRole may
// create TokenReviews and SubjectAccessReviews); its TokenReview is the
// registry token service's (registryauth.KubeReviewer).
type KubeReviewer struct {
	registryauth.KubeReviewer
}

// NewKubeReviewer reviews through c.
func NewKubeReviewer(c kubernetes.Interface) KubeReviewer {
	return KubeReviewer{registryauth.KubeReviewer{Client: c}}
}

// MayReadCache is a SubjectAccessReview: may user readcache the
// DevEnvironment env?
func (k KubeReviewer) MayReadCache(ctx context.Context, user string, env Env) (bool, error) {
	sar, err := k.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: user,
			// A ServiceAccount's groups, as the API server gives them:
			// bindings to them count.
			Groups: serviceAccountGroups(user),
			ResourceAttributes: &authzv1.ResourceAttributes{
				Group: v1alpha1.GroupVersion.Group, Resource: "devenvironments",
				Namespace: env.Namespace, Name: env.Name, Verb: VerbReadCache,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}

// serviceAccountGroups are the groups of a ServiceAccount user.
func serviceAccountGroups(user string) []string {
	const prefix = "system:serviceaccount:"
	groups := []string{"system:serviceaccounts", "system:authenticated"}
	if len(user) > len(prefix) && user[:len(prefix)] == prefix {
		rest := user[len(prefix):]
		for i := range len(rest) {
			if rest[i] == ':' {
				groups = append(groups, "system:serviceaccounts:"+rest[:i])
				break
			}
		}
	}
	return groups
}

// ReadRefusedError is an entry of spec.cache.readFrom whose cache the
// environment's ServiceAccount may not read.
type ReadRefusedError struct {
	Index int
	From  Env
	User  string
}

func (e *ReadRefusedError) Error() string {
	return fmt.Sprintf("spec.cache.readFrom[%d]: %s may not %s DevEnvironment %s, so this environment may not read its build cache (grant the verb %s on it)", e.Index, e.User, VerbReadCache, e.From, VerbReadCache)
}

// CheckReadFrom asks, for each entry of env's spec.cache.readFrom, whether
// the environment's ServiceAccount (sa) may readcache that DevEnvironment, and
// returns the environments it may read, in order, or a ReadRefusedError
// for the first it may not. An entry naming env itself is left out: its
// own cache is read first anyway.
func CheckReadFrom(ctx context.Context, r Reviewer, env *v1alpha1.DevEnvironment, sa string) ([]Env, error) {
	self := Env{Namespace: env.Namespace, Name: env.Name}
	user := identity.ServiceAccountUser(env.Namespace, sa)
	var from []Env
	for i, src := range env.CacheReadFrom() {
		e := Env{Namespace: src.Namespace, Name: src.Name}
		if e == self {
			continue
		}
		ok, err := r.MayReadCache(ctx, user, e)
		if err != nil {
			return nil, fmt.Errorf("spec.cache.readFrom[%d]: cannot review access to %s: %w", i, e, err)
		}
		if !ok {
			return nil, &ReadRefusedError{Index: i, From: e, User: user}
		}
		from = append(from, e)
	}
	return from, nil
}
