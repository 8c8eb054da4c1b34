package pods

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

// TestHashedNameFitsAndKeepsIdentitiesApart: the readable part is cut to
// fit a DNS label, the hash of the whole identity keeps two identities
// apart however their parts split, and the hash is the documented one.
func TestHashedNameFitsAndKeepsIdentitiesApart(t *testing.T) {
	long := strings.Repeat("x", 80)
	for _, n := range []string{HashedName(long, "-tcache", long, "test", "a"), HashedName("a-b-c", "", "a", "b-c")} {
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("%s: %v", n, errs)
		}
	}
	if HashedName("a-b-c", "-cache", "a", "b-c") == HashedName("a-b-c", "-cache", "a-b", "c") {
		t.Error("identities split differently by dashes share a name")
	}
	sum := sha256.Sum256([]byte("a\ntest\nunit"))
	if got, want := HashedName("a-unit", "-tcache", "a", "test", "unit"), "a-unit-"+hex.EncodeToString(sum[:4])+"-tcache"; got != want {
		t.Errorf("HashedName = %s, want %s", got, want)
	}
}
