package main

import (
	"strings"
	"testing"

	"github.com/devloop-dev/devloop/internal/source"
)

func TestLayerCompressionFlag(t *testing.T) {
	for arg, want := range map[string]source.Compression{
		"":                         source.CompressionAuto,
		"--layer-compression=auto": source.CompressionAuto,
		"--layer-compression=gzip": source.CompressionGzip,
		"--layer-compression=none": source.CompressionNone,
	} {
		var args []string
		if arg != "" {
			args = []string{arg}
		}
		o, err := parseFlags(args)
		if err != nil || o.layerCompression != want {
			t.Errorf("%q: %q, %v; want %q", arg, o.layerCompression, err, want)
		}
	}
	if _, err := parseFlags([]string{"--layer-compression=zstd"}); err == nil || !strings.Contains(err.Error(), "--layer-compression") {
		t.Errorf("zstd: err %v, want one naming the flag", err)
	}
}
