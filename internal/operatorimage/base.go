package operatorimage

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user the image runs as: distroless's nonroot, which the
// chart's and the kustomize install's runAsUser name too.
const NonRoot = 65532

// epoch is every timestamp of the base, so its digest depends only on the
// CA bundle it was given.
var epoch = time.Unix(0, 0).UTC()

// baseEntry is one file or directory of the static base.
type baseEntry struct {
	name string
	mode int64
	uid  int
	data []byte
	dir  bool
}

// staticBase is what the manager needs around a static binary, in the
// manner of distroless/static:nonroot: a passwd and group naming the
// nonroot user (65532) with a home it owns, the CA bundle for HTTPS to git
// hosts, registries and chart repositories, nsswitch.conf so Go's resolver
// reads /etc/hosts first, and a world-writable sticky /tmp (the default
// work directory when no volume is mounted).
func staticBase(p v1.Platform, caBundle []byte) (v1.Image, error) {
	entries := []baseEntry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:65532:\nnobody:x:65534:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: caBundle},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, uid: NonRoot, dir: true},
		{name: "root/", mode: 0o700, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: epoch, Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	raw := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(raw)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}

	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created:   v1.Time{Time: epoch},
		CreatedBy: "devloop: static base (passwd, group, CA certificates, /tmp)",
		Comment:   "devloop",
	}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg := cf.DeepCopy()
	cfg.Created = v1.Time{Time: epoch}
	cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
	cfg.Config.User = fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot",
		"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	return mutate.ConfigFile(img, cfg)
}

// readCABundle reads the machine's CA bundle: no public registry is needed
// for a base, and the certificates are the ones this machine trusts.
func readCABundle(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("CA bundle for the image: %w (Debian: apt-get install ca-certificates)", err)
	}
	if !bytes.Contains(data, []byte("BEGIN CERTIFICATE")) {
		return nil, fmt.Errorf("CA bundle %s holds no PEM certificate", path)
	}
	return data, nil
}
