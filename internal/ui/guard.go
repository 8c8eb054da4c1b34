package ui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
)

// TokenHeader carries the page's token on every API request. A header,
// not a cookie: a browser sends cookies to every server on 127.0.0.1
// whatever its port (another local program would receive them, and two
// dashboards would overwrite each other's), while a header is only sent
// by the page's own script to its own origin.
const TokenHeader = "X-Devloop-Token"

// CodeHeader carries the one-time code of the opened URL when the page
// trades it for its token (POST /session).
const CodeHeader = "X-Devloop-Code"

// maxCodes and maxTokens bound what a long run accumulates: one code and
// token per tab opened.
const (
	maxCodes  = 16
	maxTokens = 64
)

// LocalGuard protects the handlers when they are served on the user's
// machine with the user's credentials: anything that can reach
// 127.0.0.1 (another local user, a web page the user visits, a DNS
// rebinding) must not act as the user. It checks, in order:
//   - the Host header is 127.0.0.1:PORT or localhost:PORT (DNS rebinding
//     sends the attacker's host name);
//   - the page and its static assets (nothing secret in them) are served
//     to anyone; the URL the plugin opens carries a one-time code that the
//     page trades for a random per-page token (POST /session); the code
//     works once;
//   - every /api request carries a page token in TokenHeader (a
//     cross-site form or fetch cannot set it; page scripts of another
//     origin cannot read it);
//   - on a POST, a same-origin request: Sec-Fetch-Site, if sent, is
//     same-origin; Origin, if sent, is this server.
type LocalGuard struct {
	// Hosts are the accepted Host header values.
	Hosts []string

	mu     sync.Mutex
	codes  []string // unused one-time codes, oldest first
	tokens []string // page tokens given out, oldest first
}

// NewLocalGuard makes a guard with one one-time code (URL) for a server
// on port.
func NewLocalGuard(port int) (*LocalGuard, error) {
	g := &LocalGuard{}
	g.SetPort(port)
	if _, err := g.NewCode(); err != nil {
		return nil, err
	}
	return g, nil
}

// SetPort sets the accepted Host values once the port is known.
func (g *LocalGuard) SetPort(port int) {
	p := strconv.Itoa(port)
	g.Hosts = []string{"127.0.0.1:" + p, "localhost:" + p}
}

// NewCode adds a one-time code; the oldest unused one is dropped past
// maxCodes.
func (g *LocalGuard) NewCode() (string, error) {
	code, err := randomHex(16)
	if err != nil {
		return "", err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.codes = append(g.codes, code)
	if len(g.codes) > maxCodes {
		g.codes = g.codes[1:]
	}
	return code, nil
}

// URL is what the plugin opens: the first one-time code in the query.
func (g *LocalGuard) URL() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	code := ""
	if len(g.codes) > 0 {
		code = g.codes[0]
	}
	return g.urlOf(code)
}

func (g *LocalGuard) urlOf(code string) string {
	return "http://" + g.Hosts[0] + "/?code=" + url.QueryEscape(code)
}

// Wrap returns next behind the checks.
func (g *LocalGuard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		secureHeaders(w)
		if !g.hostAllowed(r.Host) {
			http.Error(w, "refused: Host header "+bounded(r.Host, 100)+" is not this server (127.0.0.1 or localhost with its port)", http.StatusForbidden)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead && !sameOrigin(r) {
			http.Error(w, "refused: cross-site request", http.StatusForbidden)
			return
		}
		switch {
		case r.URL.Path == "/session" && r.Method == http.MethodPost:
			g.exchange(w, r)
			return
		case r.URL.Path == "/api/session/code" && r.Method == http.MethodPost:
			if !g.tokenValid(r.Header.Get(TokenHeader)) {
				break
			}
			code, err := g.NewCode()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			writeJSON(w, http.StatusOK, map[string]string{"url": g.urlOf(code)})
			return
		case !strings.HasPrefix(r.URL.Path, "/api/") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
			// The page and its assets: nothing secret, no action.
			next.ServeHTTP(w, r)
			return
		}
		if !g.tokenValid(r.Header.Get(TokenHeader)) {
			http.Error(w, "refused: no session; open the URL kubectl devloop ui printed", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// exchange trades a one-time code for a new page token; the code is
// spent whatever the outcome of the answer's delivery.
func (g *LocalGuard) exchange(w http.ResponseWriter, r *http.Request) {
	code := r.Header.Get(CodeHeader)
	g.mu.Lock()
	i := indexOf(g.codes, code)
	if i < 0 {
		g.mu.Unlock()
		http.Error(w, "refused: this dashboard URL was already used or is wrong; each URL opens one page (the page's \"new tab\" link makes another)", http.StatusUnauthorized)
		return
	}
	g.codes = append(g.codes[:i], g.codes[i+1:]...)
	g.mu.Unlock()
	tok, err := randomHex(32)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	g.mu.Lock()
	g.tokens = append(g.tokens, tok)
	if len(g.tokens) > maxTokens {
		g.tokens = g.tokens[1:]
	}
	g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{"token": tok})
}

func (g *LocalGuard) tokenValid(tok string) bool {
	if tok == "" {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return indexOf(g.tokens, tok) >= 0
}

// indexOf compares in constant time per entry.
func indexOf(list []string, s string) int {
	found := -1
	for i, x := range list {
		if equal(x, s) {
			found = i
		}
	}
	return found
}

func (g *LocalGuard) hostAllowed(host string) bool {
	for _, h := range g.Hosts {
		if host == h {
			return true
		}
	}
	return false
}

func sameOrigin(r *http.Request) bool {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" {
		return false
	}
	if o := r.Header.Get("Origin"); o != "" && o != "http://"+r.Host {
		return false
	}
	return true
}

// secureHeaders: no framing (clickjacking an action button), no script
// but the page's own, no referrer (the first URL carries the code).
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
