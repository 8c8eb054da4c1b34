package source

import "testing"

func TestLocalRegistry(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost:5000":                   true,
		"LOCALHOST":                        true,
		"registry.localhost:5000":          true,
		"127.0.0.1:5000":                   true,
		"[::1]:5000":                       true,
		"10.250.0.1:5000":                  true,
		"192.168.1.20":                     true,
		"172.20.0.3:443":                   true,
		"169.254.10.1:5000":                true,
		"registry.devloop-system.svc:5000": true,
		"registry.devloop-system.svc.cluster.local": true,
		"registry.corp.internal":                    true,
		"ghcr.io":                                   false,
		"index.docker.io":                           false,
		"8.8.8.8:5000":                              false,
		"registry.example.com:5000":                 false,
		"":                                          false,
	} {
		if got := LocalRegistry(host); got != want {
			t.Errorf("LocalRegistry(%q) = %v, want %v", host, got, want)
		}
	}
}

func TestCompressionFor(t *testing.T) {
	cases := []struct {
		c    Compression
		host string
		want Compression
	}{
		{CompressionAuto, "10.250.0.1:5000", CompressionNone},
		{CompressionAuto, "ghcr.io", CompressionGzip},
		{CompressionGzip, "localhost:5000", CompressionGzip},
		{CompressionNone, "ghcr.io", CompressionNone},
	}
	for _, c := range cases {
		if got := c.c.For(c.host); got != c.want {
			t.Errorf("%q.For(%q) = %q, want %q", c.c, c.host, got, c.want)
		}
	}
}

func TestParseCompression(t *testing.T) {
	for in, want := range map[string]Compression{"": CompressionAuto, "auto": CompressionAuto, "gzip": CompressionGzip, "none": CompressionNone} {
		if got, err := ParseCompression(in); err != nil || got != want {
			t.Errorf("ParseCompression(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseCompression("zstd"); err == nil {
		t.Error("zstd: want an error")
	}
}
