package cli

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	authnv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/devloop-dev/devloop/internal/source"
)

// registryAudience is the audience the bundled registry's token service
// accepts besides the API server's (registryauth.DefaultAudience; the cli
// does not import the operator's packages).
const registryAudience = "devloop-registry"

// registryTokenLifetime is how long the token push requests may be used.
const registryTokenLifetime = 10 * time.Minute

// pushKeychain is the keychain of `push`: the docker config's credentials
// where it has some; for a registry on the cluster's or this machine's
// network that it has none for (the chart's bundled registry, reached by
// its NodePort or a port-forward), a ServiceAccount token for the
// environment's ServiceAccount, bound to the bundled registry's audience
// and short-lived, requested as you (TokenRequest: the API server checks
// that you may create tokens for it). The registry's token service then
// grants the repositories of the namespaces that ServiceAccount may create
// pods in. The token is requested only when the registry asks for
// credentials, and never for a registry elsewhere: it would be handed to
// that registry's token service.
type pushKeychain struct {
	clientset     kubernetes.Interface
	namespace, sa string
	insecure      bool
	once          sync.Once
	token         string
	err           error
	// challenges remembers, per registry host, what asksForDevloopTokens
	// found: one push resolves the keychain for each registry request it
	// makes, and the registry's answer does not change within it.
	mu         sync.Mutex
	challenges map[string]bool
}

// Resolve answers the docker config's credentials, or the lazy token.
func (k *pushKeychain) Resolve(res authn.Resource) (authn.Authenticator, error) {
	a, err := authn.DefaultKeychain.Resolve(res)
	if err != nil || a != authn.Anonymous {
		return a, err
	}
	if k.sa == "" || !source.LocalRegistry(res.RegistryStr()) || !k.asksForDevloopTokens(res.RegistryStr()) {
		return authn.Anonymous, nil
	}
	return k, nil
}

// asksForDevloopTokens says whether the registry at host challenges for a
// bundled-registry token (Bearer, service="devloop-registry"): only then
// is a token requested, not for a registry that wants none or another
// kind.
func (k *pushKeychain) asksForDevloopTokens(host string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	if asks, ok := k.challenges[host]; ok {
		return asks
	}
	if k.challenges == nil {
		k.challenges = map[string]bool{}
	}
	asks := k.challenged(host)
	k.challenges[host] = asks
	return asks
}

// challenged asks the registry at host.
func (k *pushKeychain) challenged(host string) bool {
	scheme := "https"
	if k.insecure {
		scheme = "http"
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(scheme + "://" + host + "/v2/")
	if err != nil {
		return false
	}
	resp.Body.Close()
	ch := resp.Header.Get("Www-Authenticate")
	return resp.StatusCode == http.StatusUnauthorized && strings.HasPrefix(strings.ToLower(ch), "bearer ") &&
		strings.Contains(ch, `service="`+registryAudience+`"`)
}

// Authorization requests the token once, when the registry first asks.
func (k *pushKeychain) Authorization() (*authn.AuthConfig, error) {
	k.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		tr, err := k.clientset.CoreV1().ServiceAccounts(k.namespace).CreateToken(ctx, k.sa, &authnv1.TokenRequest{
			Spec: authnv1.TokenRequestSpec{Audiences: []string{registryAudience}, ExpirationSeconds: ptr.To(int64(registryTokenLifetime.Seconds()))},
		}, metav1.CreateOptions{})
		if err != nil {
			k.err = fmt.Errorf("the registry asks for credentials and your docker config has none for it; requesting a registry token for serviceaccount %s/%s: %w", k.namespace, k.sa, err)
			return
		}
		k.token = tr.Status.Token
	})
	if k.err != nil {
		return nil, k.err
	}
	return &authn.AuthConfig{Username: "devloop", Password: k.token}, nil
}
