package supervisor

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"testing"
	"time"
)

// deltaRoundTrip encodes next against base, applies it, and says how big
// the delta was.
func deltaRoundTrip(t *testing.T, base, next []byte) (int, bool) {
	t.Helper()
	ops, ok := EncodeDelta(base, next)
	if !ok {
		return len(next), false
	}
	var out bytes.Buffer
	sum := sha256.Sum256(next)
	if err := applyDelta(bytes.NewReader(base), int64(len(base)), bytes.NewReader(ops), &out, int64(len(next)), hex.EncodeToString(sum[:])); err != nil {
		t.Fatalf("applying the delta: %v", err)
	}
	if !bytes.Equal(out.Bytes(), next) {
		t.Fatalf("the delta made %d bytes that are not the file", out.Len())
	}
	return len(ops), true
}

func TestDeltaCarriesOnlyWhatChanged(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	base := make([]byte, 1<<20)
	for i := range base {
		base[i] = byte(rng.Uint32())
	}
	// The same file with bytes changed in place, some inserted (a
	// shift), and some removed.
	next := bytes.Clone(base)
	copy(next[1000:], "a version string")
	for i := 300_000; i < 600_000; i += 997 {
		next[i] ^= 0xff // scattered, as changed call offsets are
	}
	next = append(next[:700_000:700_000], append([]byte("inserted code, a new function's bytes"), next[700_000:]...)...)
	next = append(next[:900_000:900_000], next[905_000:]...)

	n, ok := deltaRoundTrip(t, base, next)
	if !ok {
		t.Fatalf("no delta for a file mostly the same")
	}
	if n > 16<<10 {
		t.Errorf("the delta is %d bytes for about 2 KiB of changes in %d", n, len(next))
	}
	t.Logf("delta %d bytes for %d", n, len(next))

	// Unrelated content is sent whole.
	other := make([]byte, len(base))
	for i := range other {
		other[i] = byte(rng.Uint32())
	}
	if _, ok := EncodeDelta(base, other); ok {
		t.Errorf("a delta between unrelated files")
	}
}

func TestDeltaRefusesAnotherBase(t *testing.T) {
	base := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	next := bytes.Clone(base)
	copy(next[100:], "changed")
	ops, ok := EncodeDelta(base, next)
	if !ok {
		t.Fatal("no delta")
	}
	here := bytes.Clone(base)
	copy(here[20000:], "edited by hand in the container")
	sum := sha256.Sum256(next)
	err := applyDelta(bytes.NewReader(here), int64(len(here)), bytes.NewReader(ops), &bytes.Buffer{}, int64(len(next)), hex.EncodeToString(sum[:]))
	if err != errDeltaBase {
		t.Fatalf("applied against another base: %v", err)
	}
}

// TestDeltaOfGoBinaries prints the delta's size and time between real
// builds: DEVLOOP_DELTA_FILES="old new [old new ...]".
func TestDeltaOfGoBinaries(t *testing.T) {
	files := bytes.Fields([]byte(os.Getenv("DEVLOOP_DELTA_FILES")))
	if len(files) < 2 {
		t.Skip("DEVLOOP_DELTA_FILES not set")
	}
	for i := 0; i+1 < len(files); i += 2 {
		base, err := os.ReadFile(string(files[i]))
		if err != nil {
			t.Fatal(err)
		}
		next, err := os.ReadFile(string(files[i+1]))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		n, ok := deltaRoundTrip(t, base, next)
		t.Logf("%s -> %s: delta %d bytes of %d (%v), encoded and applied in %s", files[i], files[i+1], n, len(next), ok, time.Since(start))
	}
}
