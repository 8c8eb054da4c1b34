package liveupdate_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// TestLiveUpdateIgnoresAnotherTenantsClaimOfItsLayerID: two namespaces,
// two environments, the operator under the chart's RBAC. Team-b builds
// on a base whose config claims the diff ID of team-a's running binary
// layer for a layer of other bytes (team-a's layer with "binary v2" in
// it), and team-b's live update compares that base with its previous
// one. Team-a's next live update (binary v1 to v2) still syncs exactly
// its change, /web, into its pod: a listing made from the lie would have
// found nothing changed, synced nothing and said the build was live.
// Team-b's own image is Stalled: its layer is not what its config says.
func TestLiveUpdateIgnoresAnotherTenantsClaimOfItsLayerID(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	nsA, envA := deployLiveEnv(t)
	keyA := client.ObjectKeyFromObject(envA)
	envA = operatortest.WaitForEnv(t, keyA, operatortest.ExpectReadyAndCurrent)
	v1A := *envA.Status.Component("web").Image("web")
	runningPod(t, nsA, "web-a", webDeploymentNow(g, nsA).Spec.Template.Spec.Containers[0].Image)

	// Team-a's binary layer, as anyone who can pull its image sees it.
	claimed, forged := forgeBinaryLayer(t, v1A.Repository+"@"+v1A.Digest, "binary v1", "binary v2")

	// Team-b: deployed on an honest base, then moved to the forged one.
	nsB := operatortest.DeployNamespace(t)
	baseRepo := operatortest.Registry.Host + "/" + nsB + "/base"
	pushBase(t, baseRepo+":honest", tarLayer(t, map[string]string{"b.txt": "team b"}), nil)
	pushBase(t, baseRepo+":forged", forged, &claimed)
	operatortest.AppFiles(t, nsB, liveSource("binary b1", "<h1>b</h1>"))
	envB := liveEnv(nsB)
	envB.Spec.Components[0].Images[0].Base = baseRepo + ":honest"
	g.Expect(operatortest.Admin.Create(ctx, envB)).To(Succeed())
	keyB := client.ObjectKeyFromObject(envB)
	operatortest.WaitForEnv(t, keyB, func(g Gomega, cur *v1alpha1.DevEnvironment) {
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Namespace: nsB, Name: "web"}, &appsv1.Deployment{})).To(Succeed(), "status: %+v", cur.Status)
	})
	operatortest.MarkDeploymentAvailable(t, nsB, "web")
	envB = operatortest.WaitForEnv(t, keyB, operatortest.ExpectReadyAndCurrent)
	honestB := envB.Status.Component("web").Image("web").Digest
	operatortest.EditSpec(t, keyB, func(env *v1alpha1.DevEnvironment) {
		env.Spec.Components[0].Images[0].Base = baseRepo + ":forged"
	})
	// Team-b's live update compared its bases (whatever it decided).
	operatortest.WaitForEnv(t, keyB, func(g Gomega, cur *v1alpha1.DevEnvironment) {
		g.Expect(cur.Status.Component("web")).NotTo(BeNil())
		ist := cur.Status.Component("web").Image("web")
		g.Expect(ist).NotTo(BeNil())
		g.Expect(ist.Digest).NotTo(Equal(honestB))
		g.Expect(ist.LastUpdate).NotTo(BeEmpty())
	})

	pushLive(t, envA, "binary v2", "<h1>1</h1>")
	envA = operatortest.WaitForEnv(t, keyA, func(g Gomega, cur *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, cur)
		ist := cur.Status.Component("web").Image("web")
		g.Expect(ist.Digest).NotTo(Equal(v1A.Digest))
		g.Expect(ist.LastUpdate).To(Equal(v1alpha1.UpdateLive), "reason: %s", ist.UpdateReason)
		g.Expect(podLiveDigest(g, nsA, "web-a")).To(Equal(ist.Digest))
	})
	v2A := envA.Status.Component("web").Image("web")
	g.Expect(v2A.UpdateReason).To(Equal("synced in place: /web"))
	syncs := operatortest.LiveSyncs.Of(nsA, "web-a", v2A.Digest)
	g.Expect(syncs).NotTo(BeEmpty())
	for _, s := range syncs {
		g.Expect(s.Files).To(Equal(map[string]string{"/web": "755:binary v2"}), "team-a's sync carries exactly its change")
	}
	// Team-b's image, whose layer is not the ID its config claims, is
	// neither synced nor said to be live.
	envB = operatortest.WaitForStalled(t, keyB, v1alpha1.ReasonDeployFailed, "image web", "diff ID", "spec.components[0].images[0].base")
	g.Expect(envB.Status.Component("web").Image("web").LastUpdate).NotTo(Equal(v1alpha1.UpdateLive))
	operatortest.ExpectKstatus(t, envB, status.FailedStatus)
	operatortest.ExpectKstatus(t, envA, status.CurrentStatus)
}

// forgeBinaryLayer finds the layer of image ref holding a file whose
// content is from, and returns its diff ID and a layer of the same
// entries with every such file's content to instead.
func forgeBinaryLayer(t *testing.T, ref, from, to string) (v1.Hash, v1.Layer) {
	t.Helper()
	g := NewWithT(t)
	r, err := name.ParseReference(ref, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	img, err := remote.Image(r)
	g.Expect(err).NotTo(HaveOccurred())
	layers, err := img.Layers()
	g.Expect(err).NotTo(HaveOccurred())
	for _, l := range layers {
		data, found := rewriteTar(t, l, from, to)
		if !found {
			continue
		}
		id, err := l.DiffID()
		g.Expect(err).NotTo(HaveOccurred())
		forged, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
		g.Expect(err).NotTo(HaveOccurred())
		return id, forged
	}
	t.Fatalf("no layer of %s holds %q", ref, from)
	return v1.Hash{}, nil
}

// rewriteTar copies layer l's tar, regular files whose content is from
// written with to instead; found says whether there was one.
func rewriteTar(t *testing.T, l v1.Layer, from, to string) ([]byte, bool) {
	t.Helper()
	g := NewWithT(t)
	rc, err := l.Uncompressed()
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = rc.Close() }()
	var out bytes.Buffer
	tr, tw := tar.NewReader(rc), tar.NewWriter(&out)
	found := false
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		g.Expect(err).NotTo(HaveOccurred())
		body, err := io.ReadAll(tr)
		g.Expect(err).NotTo(HaveOccurred())
		if h.Typeflag == tar.TypeReg && string(body) == from {
			body, found = []byte(to), true
			h.Size = int64(len(body))
		}
		g.Expect(tw.WriteHeader(h)).To(Succeed())
		_, err = tw.Write(body)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(tw.Close()).To(Succeed())
	return out.Bytes(), found
}

// tarLayer is a layer of files.
func tarLayer(t *testing.T, files map[string]string) v1.Layer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for p, content := range files {
		NewWithT(t).Expect(tw.WriteHeader(&tar.Header{Name: p, Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content))})).To(Succeed())
		_, err := tw.Write([]byte(content))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
	}
	NewWithT(t).Expect(tw.Close()).To(Succeed())
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return l
}

// pushBase pushes a one-layer linux/amd64 image of l to ref; with claim,
// its config names claim as the layer's diff ID, whatever its bytes.
func pushBase(t *testing.T, ref string, l v1.Layer, claim *v1.Hash) {
	t.Helper()
	g := NewWithT(t)
	img, err := mutate.AppendLayers(empty.Image, l)
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := img.ConfigFile()
	g.Expect(err).NotTo(HaveOccurred())
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	if claim != nil {
		cfg.RootFS.DiffIDs = []v1.Hash{*claim}
	}
	img, err = mutate.ConfigFile(img, cfg)
	g.Expect(err).NotTo(HaveOccurred())
	r, err := name.ParseReference(ref, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(remote.Write(r, img)).To(Succeed())
	if claim != nil {
		pushed, err := remote.Image(r)
		g.Expect(err).NotTo(HaveOccurred())
		got, err := pushed.ConfigFile()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.RootFS.DiffIDs).To(Equal([]v1.Hash{*claim}), "the forged base claims team-a's layer ID")
	}
}
