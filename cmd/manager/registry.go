package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/devloop-dev/devloop/internal/httpserve"
	"github.com/devloop-dev/devloop/internal/registryauth"
	"github.com/devloop-dev/devloop/internal/reviewguard"
)

// registryTokenOptions configure the bundled registry's token service
// (chart registry.auth); an empty listen address turns it off.
type registryTokenOptions struct {
	listen, keyFile, certFile string
	// tlsCert and tlsKey are the service's serving certificate.
	tlsCert, tlsKey           string
	service, issuer, audience string
	ttl                       time.Duration
}

func registerRegistryTokenFlags(fs *flag.FlagSet, o *registryTokenOptions) {
	fs.StringVar(&o.listen, "registry-token-bind-address", "", "address the bundled registry's token service binds to (/token); empty: off")
	fs.StringVar(&o.keyFile, "registry-token-key", "", "PEM private key (ECDSA P-256 or RSA) the registry tokens are signed with")
	fs.StringVar(&o.certFile, "registry-token-cert", "", "PEM certificate of that key: the registry's auth.token.rootcertbundle")
	fs.StringVar(&o.service, "registry-token-service", registryauth.DefaultService, "the registry's auth.token.service")
	fs.StringVar(&o.issuer, "registry-token-issuer", registryauth.DefaultIssuer, "the registry's auth.token.issuer")
	fs.StringVar(&o.audience, "registry-token-audience", registryauth.DefaultAudience, "the one Kubernetes token audience /token accepts (`kubectl create token SA --audience=...`); API-server tokens are refused")
	fs.StringVar(&o.tlsCert, "registry-token-tls-cert", "", "PEM serving certificate of the token service (TLS only; the registry front trusts its CA)")
	fs.StringVar(&o.tlsKey, "registry-token-tls-key", "", "PEM key of --registry-token-tls-cert")
	fs.DurationVar(&o.ttl, "registry-token-ttl", registryauth.DefaultTTL, "lifetime of the registry tokens issued")
}

// addRegistryTokenService serves the token endpoint on every replica.
func addRegistryTokenService(mgr ctrl.Manager, cfg *rest.Config, o registryTokenOptions) error {
	if o.listen == "" {
		return nil
	}
	if o.keyFile == "" || o.certFile == "" {
		return errors.New("--registry-token-bind-address needs --registry-token-key and --registry-token-cert")
	}
	if o.tlsCert == "" || o.tlsKey == "" {
		return errors.New("--registry-token-bind-address needs --registry-token-tls-cert and --registry-token-tls-key: the service answers TLS only")
	}
	serving, err := httpserve.TLSFiles(o.tlsCert, o.tlsKey)
	if err != nil {
		return err
	}
	signer, err := registryauth.LoadSigner(o.keyFile, o.certFile)
	if err != nil {
		return err
	}
	// Its own connection, bounded: a flood of requests waits on it rather
	// than become a flood of TokenReviews.
	cs, err := kubernetes.NewForConfig(reviewguard.ReviewConfig(cfg))
	if err != nil {
		return err
	}
	return mgr.Add(registryauth.Listener{Addr: o.listen, TLS: serving, Handler: &registryauth.Server{
		Reviewer: registryauth.KubeReviewer{Client: cs}, Signer: signer,
		Service: o.service, Issuer: o.issuer, Audience: o.audience, TTL: o.ttl,
		Log: ctrl.Log.WithName("registry-token"),
	}})
}

// runRegistryFront is `manager registry-front`: the bundled registry pod's
// front (registryauth.Front), which holds no secret and talks to no API.
func runRegistryFront(args []string) error {
	fs := flag.NewFlagSet("registry-front", flag.ContinueOnError)
	listen := fs.String("listen", ":5000", "address clients reach the registry at")
	backend := fs.String("registry", "http://127.0.0.1:5001", "the registry, on the pod's loopback")
	token := fs.String("token-url", "", "the operator's token service, e.g. https://devloop-registry-token.devloop-system.svc:5002/token")
	tokenCA := fs.String("token-ca-file", "", "PEM bundle the token service's certificate is checked against")
	if err := fs.Parse(args); err != nil {
		return err
	}
	reg, err := url.Parse(*backend)
	if err != nil || reg.Host == "" {
		return fmt.Errorf("--registry %q: want http://host:port", *backend)
	}
	tok, err := url.Parse(*token)
	if err != nil || tok.Host == "" || tok.Scheme != "https" {
		return fmt.Errorf("--token-url %q: want https://host:port/token (tokens never cross the network in clear)", *token)
	}
	var ca []byte
	if *tokenCA != "" {
		if ca, err = os.ReadFile(*tokenCA); err != nil {
			return err
		}
	}
	front, err := registryauth.NewFront(reg, tok, ca)
	if err != nil {
		return fmt.Errorf("--token-ca-file: %w", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "registry front on %s: registry %s, tokens %s\n", *listen, reg, tok)
	// Blob uploads and downloads are long: no overall read or write
	// deadline, only on headers.
	srv := &http.Server{Addr: *listen, Handler: front, ReadHeaderTimeout: 30 * time.Second, MaxHeaderBytes: 64 << 10}
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
