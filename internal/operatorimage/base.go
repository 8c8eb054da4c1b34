package operatorimage

import (
	"bytes"
	"fmt"
	"os"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/internal/scratchimage"
)

// NonRoot is the user the image runs as: distroless's nonroot, which the
// chart's and the kustomize install's runAsUser name too.
const NonRoot = 65532

// staticBase is what the manager needs around a static binary, in the
// manner of distroless/static:nonroot: a passwd and group naming the
// nonroot user (65532) with a home it owns, the CA bundle for HTTPS to git
// hosts, registries and chart repositories, nsswitch.conf so Go's resolver
// reads /etc/hosts first, and a world-writable sticky /tmp (the default
// work directory when no volume is mounted). Every time is the epoch, so
// its digest depends only on the CA bundle and the platform.
func staticBase(p v1.Platform, caBundle []byte) (v1.Image, error) {
	entries := []scratchimage.Entry{
		{Name: "etc/", Mode: 0o755, Dir: true},
		{Name: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnonroot:x:65532:\nnobody:x:65534:\n")},
		{Name: "etc/nsswitch.conf", Mode: 0o644, Data: []byte("hosts: files dns\n")},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n")},
		{Name: "etc/ssl/", Mode: 0o755, Dir: true},
		{Name: "etc/ssl/certs/", Mode: 0o755, Dir: true},
		{Name: "etc/ssl/certs/ca-certificates.crt", Mode: 0o644, Data: caBundle},
		{Name: "home/", Mode: 0o755, Dir: true},
		{Name: "home/nonroot/", Mode: 0o700, UID: NonRoot, Dir: true},
		{Name: "root/", Mode: 0o700, Dir: true},
		{Name: "tmp/", Mode: 0o1777, Dir: true},
	}
	epoch := v1.Time{Time: scratchimage.Epoch}
	history := v1.History{
		Created:   epoch,
		CreatedBy: "devloop: static base (passwd, group, CA certificates, /tmp)",
		Comment:   "devloop",
	}
	return scratchimage.Image(entries, history, func(cfg *v1.ConfigFile) {
		cfg.Created = epoch
		cfg.OS, cfg.Architecture, cfg.Variant = p.OS, p.Architecture, p.Variant
		cfg.Config.User = fmt.Sprintf("%d:%d", NonRoot, NonRoot)
		cfg.Config.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/nonroot",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}
	})
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
