package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"syscall"
	"time"

	"golang.org/x/crypto/ssh"

	"github.com/devloop-dev/devloop/internal/fault"
)

// Timeouts of every outbound connection the operator makes for a tenant.
const (
	DialTimeout           = 30 * time.Second
	TLSHandshakeTimeout   = 10 * time.Second
	ResponseHeaderTimeout = 2 * time.Minute
	// MaxRedirects is how many redirects one request may follow.
	MaxRedirects = 5
)

// DialContext dials addr ("host:port") if the policy allows it: the host
// name is checked against the host patterns, then every address it
// resolves to is checked just before the connection to it is made, so
// what is dialled is what was checked. A refusal is a
// fault.Permanent(*RefusedError).
func (p *Policy) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	allowed, err := p.CheckHost(addr)
	if err != nil {
		return nil, fault.Permanent(err)
	}
	d := &net.Dialer{Timeout: DialTimeout, KeepAlive: 30 * time.Second}
	if !allowed && p != nil {
		d.ControlContext = func(_ context.Context, _, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("egress policy: unexpected address %q", address)
			}
			return p.CheckAddr(addr, ap.Addr())
		}
	}
	conn, err := d.DialContext(ctx, network, addr)
	var refused *RefusedError
	if err != nil && errors.As(err, &refused) {
		// Not a network failure that a retry could fix: the bare refusal,
		// without the *net.OpError around it.
		return nil, fault.Permanent(refused)
	}
	return conn, err
}

type transportOnce struct {
	once sync.Once
	t    *http.Transport
}

// Transport is the policy's HTTP transport, made once: dials checked by
// the policy, timeouts on dialling, the TLS handshake and the response
// headers. A nil policy has one too (checking nothing).
func (p *Policy) Transport() http.RoundTripper {
	if p == nil {
		return unrestricted.Transport()
	}
	p.transport.once.Do(func() {
		p.transport.t = &http.Transport{
			// A proxy from the environment is dialled like any host:
			// allow it with --egress-allow-host. Requests through it are
			// checked by name and, for literal addresses, by address
			// (RoundTrip); the proxy resolves the names.
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           p.DialContext,
			ForceAttemptHTTP2:     true,
			MaxIdleConns:          100,
			MaxIdleConnsPerHost:   50,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   TLSHandshakeTimeout,
			ExpectContinueTimeout: time.Second,
			ResponseHeaderTimeout: ResponseHeaderTimeout,
		}
	})
	return &roundTripper{p: p, next: p.transport.t}
}

// unrestricted is the policy of nil: timeouts, no checks.
var unrestricted = &Policy{}

// roundTripper checks the request's host before sending it (so a denied
// literal address or host pattern is refused even through a proxy) and
// names the request's URL in a refusal.
type roundTripper struct {
	p    *Policy
	next *http.Transport
}

func (rt *roundTripper) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := rt.p.checkURLHost(req); err != nil {
		return nil, err
	}
	resp, err := rt.next.RoundTrip(req)
	var refused *RefusedError
	if err != nil && errors.As(err, &refused) {
		r := *refused
		r.URL = req.URL.Redacted()
		return nil, fault.Permanent(&r)
	}
	return resp, err
}

// checkURLHost checks a request's host by name and, when it is a literal
// address, by address.
func (p *Policy) checkURLHost(req *http.Request) error {
	if p == nil || req.URL == nil {
		return nil
	}
	hostport := req.URL.Host
	if req.URL.Port() == "" {
		port := "443"
		if req.URL.Scheme == "http" {
			port = "80"
		}
		hostport = net.JoinHostPort(req.URL.Hostname(), port)
	}
	allowed, err := p.CheckHost(hostport)
	if err == nil && !allowed {
		if ip, perr := netip.ParseAddr(req.URL.Hostname()); perr == nil {
			err = p.CheckAddr(hostport, ip)
		}
	}
	if err != nil {
		var refused *RefusedError
		if errors.As(err, &refused) {
			refused.URL = req.URL.Redacted()
		}
		return fault.Permanent(err)
	}
	return nil
}

// Client is an HTTP client through the policy's transport, with timeout
// bounding each request as a whole (none when zero) and at most
// MaxRedirects redirects, never from HTTPS to plain HTTP.
func (p *Policy) Client(timeout time.Duration) *http.Client {
	return &http.Client{Transport: p.Transport(), Timeout: timeout, CheckRedirect: CheckRedirect}
}

// CheckRedirect caps redirects at MaxRedirects and refuses a redirect from
// HTTPS to plain HTTP. Where a redirect may go is checked when it is
// dialled.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	if len(via) > MaxRedirects {
		return fault.Permanentf("stopped after %d redirects", MaxRedirects)
	}
	if len(via) > 0 && via[len(via)-1].URL.Scheme == "https" && req.URL.Scheme == "http" {
		return fault.Permanentf("refusing a redirect from HTTPS to plain HTTP (%s)", req.URL.Redacted())
	}
	return nil
}

type contextKey struct{}

// WithPolicy returns ctx carrying p, for clients shared by the whole
// process (go-git's HTTP transport) that learn the policy per request.
func WithPolicy(ctx context.Context, p *Policy) context.Context {
	return context.WithValue(ctx, contextKey{}, p)
}

// FromContext is the policy ctx carries; nil when none.
func FromContext(ctx context.Context) *Policy {
	p, _ := ctx.Value(contextKey{}).(*Policy)
	return p
}

// ContextTransport sends each request through the transport of the policy
// its context carries (WithPolicy), or an unrestricted one with the same
// timeouts when it carries none.
var ContextTransport http.RoundTripper = contextTransport{}

type contextTransport struct{}

func (contextTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	return FromContext(req.Context()).Transport().RoundTrip(req)
}

// CheckResolved resolves hostport's host and checks every address it
// names; it is the check for clients whose dialler cannot be replaced
// (go-git's SSH transport). Pair it with HostKeyCallback, which checks the
// address actually connected to before any credential is sent.
func (p *Policy) CheckResolved(ctx context.Context, hostport string) error {
	allowed, err := p.CheckHost(hostport)
	if err != nil {
		return fault.Permanent(err)
	}
	if allowed || p == nil {
		return nil
	}
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		host = hostport
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		// Not this check's business: the client reports it when it dials.
		return nil
	}
	for _, a := range addrs {
		if err := p.CheckAddr(hostport, a); err != nil {
			return fault.Permanent(err)
		}
	}
	return nil
}

// HostKeyCallback wraps next with the policy's check of the address the
// SSH connection reached: the handshake stops there, before the client
// authenticates.
func (p *Policy) HostKeyCallback(next ssh.HostKeyCallback) ssh.HostKeyCallback {
	if p == nil {
		return next
	}
	return func(hostname string, remote net.Addr, key ssh.PublicKey) error {
		allowed, err := p.CheckHost(hostname)
		if err != nil {
			return fault.Permanent(err)
		}
		if !allowed {
			if ta, ok := remote.(*net.TCPAddr); ok {
				if ip, ok := netip.AddrFromSlice(ta.IP); ok {
					if err := p.CheckAddr(hostname, ip); err != nil {
						return fault.Permanent(err)
					}
				}
			}
		}
		if next == nil {
			return fmt.Errorf("no host key callback")
		}
		return next(hostname, remote, key)
	}
}

// ContextClient is a client through ContextTransport, with the redirect
// cap, for clients made once per process.
func ContextClient() *http.Client {
	return &http.Client{Transport: ContextTransport, CheckRedirect: CheckRedirect}
}
