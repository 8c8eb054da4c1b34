package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"net/url"
	"strconv"
)

// CookieName holds the per-run token once the opened URL handed it over.
const CookieName = "devloop_ui"

// CSRFHeader carries the page's CSRF token on every action (POST).
const CSRFHeader = "X-Devloop-CSRF"

// LocalGuard protects the handlers when they are served on the user's
// machine with the user's credentials: anything that can reach
// 127.0.0.1 (another local user, a web page the user visits, a DNS
// rebinding) must not act as the user. It checks, in order:
//   - the Host header is 127.0.0.1:PORT or localhost:PORT (DNS rebinding
//     sends the attacker's host name);
//   - the per-run token: given once in the URL the plugin opens, then as
//     an HttpOnly SameSite=Strict cookie (a cross-site request has no
//     cookie, and page scripts cannot read it);
//   - on a POST, a same-origin request: Sec-Fetch-Site, if sent, is
//     same-origin; Origin, if sent, is this server; and the CSRF header
//     matches the token the page read from /api/session.
type LocalGuard struct {
	Token string
	CSRF  string
	// Hosts are the accepted Host header values.
	Hosts []string
}

// NewLocalGuard makes random tokens for a server on port.
func NewLocalGuard(port int) (*LocalGuard, error) {
	tok, err := randomHex(32)
	if err != nil {
		return nil, err
	}
	csrf, err := randomHex(32)
	if err != nil {
		return nil, err
	}
	g := &LocalGuard{Token: tok, CSRF: csrf}
	g.SetPort(port)
	return g, nil
}

// SetPort sets the accepted Host values once the port is known.
func (g *LocalGuard) SetPort(port int) {
	p := strconv.Itoa(port)
	g.Hosts = []string{"127.0.0.1:" + p, "localhost:" + p}
}

// URL is what the plugin opens: the token in the query, once.
func (g *LocalGuard) URL() string {
	return "http://" + g.Hosts[0] + "/?token=" + url.QueryEscape(g.Token)
}

// Wrap returns next behind the checks.
func (g *LocalGuard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secureHeaders(w)
		if !g.hostAllowed(r.Host) {
			http.Error(w, "refused: Host header "+bounded(r.Host, 100)+" is not this server (127.0.0.1 or localhost with its port)", http.StatusForbidden)
			return
		}
		if t := r.URL.Query().Get("token"); t != "" && r.Method == http.MethodGet && r.URL.Path == "/" {
			if !equal(t, g.Token) {
				http.Error(w, "refused: wrong token; open the URL kubectl devloop ui printed", http.StatusUnauthorized)
				return
			}
			http.SetCookie(w, &http.Cookie{Name: CookieName, Value: g.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			// Drop the token from the address bar and the history.
			http.Redirect(w, r, "/", http.StatusSeeOther)
			return
		}
		c, err := r.Cookie(CookieName)
		if err != nil || !equal(c.Value, g.Token) {
			http.Error(w, "refused: no session; open the URL kubectl devloop ui printed", http.StatusUnauthorized)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !g.sameOrigin(r) {
				http.Error(w, "refused: cross-site request", http.StatusForbidden)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// SessionCSRF is the token the page sends back on actions.
func (g *LocalGuard) SessionCSRF() string { return g.CSRF }

func (g *LocalGuard) hostAllowed(host string) bool {
	for _, h := range g.Hosts {
		if host == h {
			return true
		}
	}
	return false
}

func (g *LocalGuard) sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		return false
	}
	return equal(r.Header.Get(CSRFHeader), g.CSRF)
}

// secureHeaders: no framing (clickjacking an action button), no script
// but the page's own, no referrer (the first URL carries the token).
func secureHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cache-Control", "no-store")
}

func equal(a, b string) bool {
	return len(a) == len(b) && subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func randomHex(n int) (string, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
