package registryauth

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"

	"github.com/devloop-dev/devloop/internal/reviewguard"
)

// Defaults of the chart and the manager's flags.
const (
	DefaultService  = "devloop-registry"
	DefaultIssuer   = "devloop"
	DefaultAudience = "devloop-registry"
	DefaultTTL      = 5 * time.Minute
)

// Bounds on what a caller sends: a Kubernetes token is a few kB at most.
const (
	maxCredentialLen = 16 << 10
	maxFormBytes     = 64 << 10
)

// Reviewer is the API server's judgement: TokenReview and
// SubjectAccessReview (KubeReviewer is the real one).
type Reviewer interface {
	// Authenticate returns the token's user, ok false when the API server
	// does not authenticate it for any of audiences (nil: its own).
	Authenticate(ctx context.Context, token string, audiences []string) (user authnv1.UserInfo, ok bool, err error)
	// MayCreatePods says whether user may create pods in namespace.
	MayCreatePods(ctx context.Context, user authnv1.UserInfo, namespace string) (bool, error)
}

// Server is the token endpoint (GET with Basic, POST with the OAuth2
// password grant).
type Server struct {
	Reviewer Reviewer
	Signer   *Signer
	// Service is the registry's auth.token.service, Issuer its issuer.
	Service, Issuer string
	// Audience is the one token audience accepted (DefaultAudience): a
	// token of the API server's own audience is an API credential, never
	// to be sent to a registry.
	Audience string
	TTL      time.Duration
	Log      logr.Logger
	// Guard remembers refused tokens and bounds reviews per source.
	Guard reviewguard.Guard
	// now is time.Now, settable by tests.
	now func() time.Time
}

// tokenResponse is the token endpoint's answer; both field names, for
// Docker-style and OAuth2 clients.
type tokenResponse struct {
	Token       string `json:"token"`
	AccessToken string `json:"access_token"`
	ExpiresIn   int    `json:"expires_in"`
	IssuedAt    string `json:"issued_at"`
}

// ServeHTTP answers one token request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Cache-Control", "no-store")
	service, scopes, password, status, msg := s.readRequest(w, r)
	if status != 0 {
		if status == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Basic realm="devloop registry: a Kubernetes token as the password"`)
		}
		http.Error(w, msg, status)
		return
	}
	if service != s.Service {
		http.Error(w, fmt.Sprintf("unknown service %q", truncate(service, 64)), http.StatusBadRequest)
		return
	}
	switch s.Guard.Check(password, reviewguard.Source(r)) {
	case reviewguard.RefusedRecently:
		w.Header().Set("WWW-Authenticate", `Basic realm="devloop registry: a Kubernetes token as the password"`)
		http.Error(w, "not a Kubernetes token of audience "+s.audience()+" (refused moments ago)", http.StatusUnauthorized)
		return
	case reviewguard.TooMany:
		w.Header().Set("Retry-After", "1")
		http.Error(w, "too many token reviews from this address", http.StatusTooManyRequests)
		return
	}
	user, ok, err := s.authenticate(r.Context(), password)
	if err != nil {
		s.Log.Error(err, "token review")
		http.Error(w, "cannot review the token now", http.StatusServiceUnavailable)
		return
	}
	if !ok {
		s.Guard.Refused(password)
		w.Header().Set("WWW-Authenticate", `Basic realm="devloop registry: a Kubernetes token as the password"`)
		http.Error(w, "not a Kubernetes token of audience "+s.audience()+" (kubectl create token SA --audience="+s.audience()+")", http.StatusUnauthorized)
		return
	}
	access, err := s.authorize(r.Context(), user, scopes)
	if err != nil {
		s.Log.Error(err, "subject access review", "user", user.Username)
		http.Error(w, "cannot review access now", http.StatusServiceUnavailable)
		return
	}
	now := s.clock()
	ttl := s.TTL
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	jti := make([]byte, 16)
	_, _ = rand.Read(jti)
	tok, err := s.Signer.Sign(Claims{
		Issuer: s.Issuer, Subject: user.Username, Audience: s.Service,
		IssuedAt: now.Unix(), NotBefore: now.Unix(), Expiration: now.Add(ttl).Unix(),
		JWTID: hex.EncodeToString(jti), Access: access,
	})
	if err != nil {
		s.Log.Error(err, "signing a registry token")
		http.Error(w, "cannot sign a token", http.StatusInternalServerError)
		return
	}
	s.Log.V(1).Info("registry token", "user", user.Username, "access", access)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(tokenResponse{Token: tok, AccessToken: tok, ExpiresIn: int(ttl.Seconds()), IssuedAt: now.UTC().Format(time.RFC3339)})
}

// readRequest takes the service, the scopes and the password from a GET
// (query, Basic) or a POST (form, grant_type=password). status is non-zero
// when the request is refused.
func (s *Server) readRequest(w http.ResponseWriter, r *http.Request) (service string, scopes []string, password string, status int, msg string) {
	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		service, scopes = q.Get("service"), q["scope"]
		_, pw, ok := r.BasicAuth()
		if !ok || pw == "" {
			return "", nil, "", http.StatusUnauthorized, "no credentials: the password must be a Kubernetes token"
		}
		password = pw
	case http.MethodPost:
		r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
		if err := r.ParseForm(); err != nil {
			return "", nil, "", http.StatusBadRequest, "unreadable form"
		}
		if gt := r.PostForm.Get("grant_type"); gt != "password" {
			// The refresh_token grant would need refresh tokens; clients
			// fall back to GET on 400.
			return "", nil, "", http.StatusBadRequest, "only grant_type=password is supported"
		}
		service, password = r.PostForm.Get("service"), r.PostForm.Get("password")
		// OAuth2 scopes are one space-separated field.
		for _, f := range r.PostForm["scope"] {
			scopes = append(scopes, strings.Fields(f)...)
		}
		if password == "" {
			return "", nil, "", http.StatusUnauthorized, "no credentials: the password must be a Kubernetes token"
		}
	default:
		return "", nil, "", http.StatusMethodNotAllowed, "GET or POST"
	}
	if len(password) > maxCredentialLen {
		return "", nil, "", http.StatusUnauthorized, "credential too long"
	}
	if len(scopes) > maxScopes {
		return "", nil, "", http.StatusBadRequest, fmt.Sprintf("at most %d scopes", maxScopes)
	}
	return service, scopes, password, 0, ""
}

// authenticate reviews the token for the registry's audience only.
func (s *Server) authenticate(ctx context.Context, token string) (authnv1.UserInfo, bool, error) {
	return s.Reviewer.Authenticate(ctx, token, []string{s.audience()})
}

// authorize grants each scope whose namespace the user may create pods in;
// the others are left out of the token.
func (s *Server) authorize(ctx context.Context, user authnv1.UserInfo, scopes []string) ([]Access, error) {
	decided := map[string]bool{}
	var granted []Access
	for _, sc := range scopes {
		a, ok := parseScope(sc)
		if !ok {
			continue
		}
		ns, ok := namespaceOf(a.Name)
		if !ok {
			continue
		}
		allowed, seen := decided[ns]
		if !seen {
			var err error
			if allowed, err = s.Reviewer.MayCreatePods(ctx, user, ns); err != nil {
				return nil, err
			}
			decided[ns] = allowed
		}
		if allowed {
			granted = append(granted, a)
		}
	}
	return granted, nil
}

func (s *Server) audience() string {
	if s.Audience == "" {
		return DefaultAudience
	}
	return s.Audience
}

func (s *Server) clock() time.Time {
	if s.now != nil {
		return s.now()
	}
	return time.Now()
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
