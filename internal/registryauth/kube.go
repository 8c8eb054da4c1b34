package registryauth

import (
	"context"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// KubeReviewer asks the API server (TokenReview, SubjectAccessReview) as
// the operator, which needs create on both (its ClusterRole has them).
type KubeReviewer struct {
	Client kubernetes.Interface
}

// Authenticate is a TokenReview.
func (k KubeReviewer) Authenticate(ctx context.Context, token string, audiences []string) (authnv1.UserInfo, bool, error) {
	tr, err := k.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return authnv1.UserInfo{}, false, err
	}
	return tr.Status.User, tr.Status.Authenticated, nil
}

// MayCreatePods is a SubjectAccessReview for the user as the TokenReview
// described it (name, uid, groups, extra).
func (k KubeReviewer) MayCreatePods(ctx context.Context, user authnv1.UserInfo, namespace string) (bool, error) {
	extra := map[string]authzv1.ExtraValue{}
	for key, v := range user.Extra {
		extra[key] = authzv1.ExtraValue(v)
	}
	sar, err := k.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
			ResourceAttributes: &authzv1.ResourceAttributes{Namespace: namespace, Verb: "create", Resource: "pods"},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}
