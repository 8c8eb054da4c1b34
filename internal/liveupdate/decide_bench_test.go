package liveupdate

import (
	"bytes"
	"crypto/rand"
	"io"
	"testing"
)

// BenchmarkLiveUpdateOfABinary: deciding the live update of a changed
// binary and writing its tar, an operator-sized one (40 MiB) and the
// bench server's size (8 MiB). "once" keeps the binary from the pass that
// compares it (now); "read again" drops what was kept, so the tar reads
// the layer a second time (before).
//
//	go test ./internal/liveupdate -run '^$' -bench LiveUpdateOfABinary -benchtime 10x
func BenchmarkLiveUpdateOfABinary(b *testing.B) {
	t := &testing.T{}
	for _, size := range []struct {
		name  string
		bytes int
	}{{"8MiB", 8 << 20}, {"40MiB", 40 << 20}} {
		v1, v2 := make([]byte, size.bytes), make([]byte, size.bytes)
		_, _ = rand.Read(v1)
		copy(v2, v1)
		v2[len(v2)/2]++ // one byte differs, as a rebuild's does somewhere
		base := testImage(t, nil, layerFiles{"etc/os-release": "distroless"})
		old, _ := withCountedLayer(t, base, map[string]string{"web": string(v1)})
		next, _ := withCountedLayer(t, base, map[string]string{"web": string(v2)})
		for _, mode := range []string{"once", "read again"} {
			b.Run(size.name+"/"+mode, func(b *testing.B) {
				b.SetBytes(int64(size.bytes))
				for b.Loop() {
					d, err := Decide(old, next, []string{"/web"})
					if err != nil || !d.Live {
						b.Fatalf("%v %v", d, err)
					}
					if mode == "read again" {
						for i := range d.Files {
							d.Files[i].kept = nil
						}
					}
					var buf bytes.Buffer
					if err := WriteTar(&buf, next, d.Files, DefaultMaxBytes); err != nil {
						b.Fatal(err)
					}
					_, _ = io.Copy(io.Discard, &buf)
				}
			})
		}
	}
}
