package timeline

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// PushedAnnotation is what `kubectl devloop push` measured of its last
// push, set on the DevEnvironment with the reconcile request:
// "source=app;digest=sha256:…;at=<RFC 3339>;pack-ms=120;upload-ms=900".
// It rides on the environment, not in the pushed artifact: an annotation
// in the OCI manifest would give the same tree a new digest at every push,
// and the same content must push the same digest.
const PushedAnnotation = "devloop.dev/pushed"

// maxPushed bounds the annotation the operator parses.
const maxPushed = 512

// Pushed is what the client measured of one push.
type Pushed struct {
	Source, Digest string
	At             time.Time
	Pack, Upload   time.Duration
}

// String is the annotation's value.
func (p Pushed) String() string {
	return fmt.Sprintf("source=%s;digest=%s;at=%s;pack-ms=%d;upload-ms=%d",
		p.Source, p.Digest, p.At.UTC().Format(time.RFC3339Nano), p.Pack.Milliseconds(), p.Upload.Milliseconds())
}

// ParsePushed reads the annotation; ok is false for anything malformed
// or oversized (it is the tenant's to write).
func ParsePushed(s string) (p Pushed, ok bool) {
	if s == "" || len(s) > maxPushed {
		return Pushed{}, false
	}
	for _, kv := range strings.Split(s, ";") {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		switch k {
		case "source":
			p.Source = v
		case "digest":
			p.Digest = v
		case "at":
			p.At, err = time.Parse(time.RFC3339Nano, v)
		case "pack-ms":
			p.Pack, err = millis(v)
		case "upload-ms":
			p.Upload, err = millis(v)
		}
		if err != nil {
			return Pushed{}, false
		}
	}
	return p, p.Source != "" && p.Digest != "" && !p.At.IsZero()
}

// millis parses a duration in milliseconds, at most a day.
func millis(v string) (time.Duration, error) {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > 24*3600*1000 {
		return 0, fmt.Errorf("bad milliseconds %q", v)
	}
	return time.Duration(n) * time.Millisecond, nil
}

// Matches reports whether the push is what moved one of names: its
// source is among them and resolved to the pushed digest.
func (p Pushed) Matches(env *v1alpha1.DevEnvironment, names []string) bool {
	if !slices.Contains(names, p.Source) {
		return false
	}
	st := env.Status.Source(p.Source)
	return st != nil && (st.Digest == p.Digest || strings.HasSuffix(st.Revision, "@"+p.Digest))
}

// Steps are the client's steps: Pack from At, then Upload.
func (p Pushed) Steps() []Step {
	return []Step{
		{Name: Pack, Start: p.At.UTC(), Duration: p.Pack},
		{Name: Upload, Start: p.At.Add(p.Pack).UTC(), Duration: p.Upload},
	}
}
