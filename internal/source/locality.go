package source

import (
	"fmt"
	"net"
	"strings"
)

// LocalRegistry reports whether host (host or host:port, as in an image
// reference) names a registry on this machine or inside the cluster's
// network: localhost, a loopback, private or link-local address, or a
// cluster-internal service name. Nothing is resolved, so the answer is the
// same everywhere the name is read.
//
// Blobs for a local registry are pushed uncompressed: over loopback or a
// pod network, compressing a 10 MB binary costs more time (150–600 ms on
// two cores) than sending it as it is, and the node's runtime then has no
// gunzip to do either. Registries elsewhere get gzip, which saves more
// bandwidth than it costs time.
func LocalRegistry(host string) bool {
	h := host
	if hh, _, err := net.SplitHostPort(host); err == nil {
		h = hh
	}
	h = strings.ToLower(strings.Trim(h, "[]"))
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	for _, suffix := range []string{".svc", ".svc.cluster.local", ".cluster.local", ".internal", ".local"} {
		if strings.HasSuffix(h, suffix) {
			return true
		}
	}
	ip := net.ParseIP(h)
	return ip != nil && (ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast())
}

// Compression is how an artifact's layer is stored in the registry.
type Compression string

const (
	// CompressionAuto is gzip, or none for a LocalRegistry.
	CompressionAuto Compression = ""
	CompressionGzip Compression = "gzip"
	CompressionNone Compression = "none"
)

// ParseCompression reads a flag's value: gzip, none, or auto (also "").
func ParseCompression(s string) (Compression, error) {
	switch c := Compression(s); c {
	case CompressionGzip, CompressionNone, CompressionAuto:
		return c, nil
	case "auto":
		return CompressionAuto, nil
	}
	return "", fmt.Errorf("must be gzip, none or auto, got %q", s)
}

// For resolves CompressionAuto for the registry host.
func (c Compression) For(host string) Compression {
	if c != CompressionAuto {
		return c
	}
	if LocalRegistry(host) {
		return CompressionNone
	}
	return CompressionGzip
}
