package reviewguard

import (
	"crypto/sha256"
	"net"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"
)

// Defaults: a refusal is remembered for RefusalTTL; a source may ask for
// SourceBurst reviews at once and SourceRate a second after that. A build
// or a pull asks for a handful (callers are remembered once accepted), so
// only a flood meets the limit.
const (
	RefusalTTL  = 30 * time.Second
	SourceRate  = 5
	SourceBurst = 30

	// maxEntries bounds each memory: past it, expired entries are dropped,
	// and if none were, the oldest memory is forgotten whole (a flood of
	// distinct tokens then costs reviews only up to the client's bound).
	maxEntries = 4096

	// ReviewQPS and ReviewBurst bound the review client (ReviewConfig).
	ReviewQPS   = 20
	ReviewBurst = 40
)

// Guard decides whether a request may cost a TokenReview. The zero value
// uses the defaults.
type Guard struct {
	// RefusalTTL, SourceRate, SourceBurst override the defaults when > 0.
	RefusalTTL  time.Duration
	SourceRate  float64
	SourceBurst int

	mu       sync.Mutex
	refused  map[[sha256.Size]byte]time.Time
	limiters map[string]*rate.Limiter
	now      func() time.Time
}

// Verdict is what a Guard says of a request about to be reviewed.
type Verdict int

const (
	// Review: ask the API server.
	Review Verdict = iota
	// RefusedRecently: the token was refused within RefusalTTL; answer 401.
	RefusedRecently
	// TooMany: the source asked for too many reviews; answer 429.
	TooMany
)

// Check is called with the token and its source (Source) before a review.
func (g *Guard) Check(token, src string) Verdict {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock()
	if until, ok := g.refused[sha256.Sum256([]byte(token))]; ok && now.Before(until) {
		return RefusedRecently
	}
	lim, ok := g.limiters[src]
	if !ok {
		if g.limiters == nil || len(g.limiters) >= maxEntries {
			// Idle sources' buckets are full again: forgetting them grants
			// nothing a fresh bucket would not.
			g.limiters = map[string]*rate.Limiter{}
		}
		lim = rate.NewLimiter(rate.Limit(pick(g.SourceRate, SourceRate)), int(pick(float64(g.SourceBurst), SourceBurst)))
		g.limiters[src] = lim
	}
	if !lim.AllowN(now, 1) {
		return TooMany
	}
	return Review
}

// Refused remembers that the API server refused token.
func (g *Guard) Refused(token string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock()
	if g.refused == nil {
		g.refused = map[[sha256.Size]byte]time.Time{}
	}
	if len(g.refused) >= maxEntries {
		for k, until := range g.refused {
			if !now.Before(until) {
				delete(g.refused, k)
			}
		}
		if len(g.refused) >= maxEntries {
			g.refused = map[[sha256.Size]byte]time.Time{}
		}
	}
	ttl := g.RefusalTTL
	if ttl <= 0 {
		ttl = RefusalTTL
	}
	g.refused[sha256.Sum256([]byte(token))] = now.Add(ttl)
}

// Source is the address a request came from: the peer's IP, and the
// client the registry's front forwarded (X-Forwarded-For), since every
// token request reaches the operator through that front. A caller
// reaching the operator directly may vary the header, but never its peer
// address, and the review client's bound caps what it gains.
func Source(r *http.Request) string {
	host := Peer(r)
	if fwd := r.Header.Get("X-Forwarded-For"); fwd != "" {
		if len(fwd) > 256 {
			fwd = fwd[:256]
		}
		return host + "|" + fwd
	}
	return host
}

// Peer is the IP address of the request's peer.
func Peer(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// ReviewConfig is cfg with the review client's bound: client-go waits
// rather than send more than ReviewQPS reviews a second, whatever the
// callers do.
func ReviewConfig(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = ReviewQPS, ReviewBurst
	c.RateLimiter = nil
	return c
}

func (g *Guard) clock() time.Time {
	if g.now != nil {
		return g.now()
	}
	return time.Now()
}

func pick(v, def float64) float64 {
	if v > 0 {
		return v
	}
	return def
}
