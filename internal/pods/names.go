package pods

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// HashedName names an object devloop creates for an environment (a builder
// Job, a warm builder, a cache claim): readable, cut so that
// readable-<hash>suffix fits 63 characters, where hash is the first 8 hex
// digits of the SHA-256 of identity joined by newlines. Two identities
// never share a name however their parts are split by dashes, and a prefix
// cut to fit loses nothing. Builder and test pods' objects share the
// scheme, and each kind its own suffix, so their names never meet.
func HashedName(readable, suffix string, identity ...string) string {
	tail := "-" + shortHash(identity...) + suffix
	if max := validation.DNS1123LabelMaxLength - len(tail); len(readable) > max {
		readable = readable[:max]
	}
	return strings.TrimRight(readable, "-.") + tail
}

// shortHash is the first 8 hex digits of the SHA-256 of parts joined by
// newlines.
func shortHash(parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:4])
}
