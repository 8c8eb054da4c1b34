package controllers

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// webEnv is an environment with one in-process image built from an OCI
// source: a binary and a static directory, two layers, a content tag and a
// revision tag.
func webEnv(ns string) *v1alpha1.DevEnvironment {
	return &v1alpha1.DevEnvironment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: v1alpha1.DevEnvironmentSpec{
			Registry: &v1alpha1.RegistrySpec{Prefix: reg.host + "/" + ns, Insecure: true},
			Sources: []v1alpha1.Source{{Name: "app", OCI: &v1alpha1.OCISource{
				Repository: reg.host + "/" + ns + "/src", Tag: "dev", Insecure: true}}},
			Components: []v1alpha1.Component{{
				Name: "web",
				Images: []v1alpha1.ImageSpec{{
					Name: "web", Source: "app",
					Layers: []v1alpha1.LayerMapping{
						{From: "bin/web", To: "/web", Mode: "0755"},
						{From: "static", To: "/srv/static"},
					},
					Entrypoint: []string{"/web"},
					Tags:       []string{"{{ .ContentHash }}", "rev-{{ .ShortRevision }}"},
				}},
				Manifests: &v1alpha1.ManifestsSpec{Source: "app"},
			}},
		},
	}
}

func webSource(binary string) map[string]string {
	return map[string]string{"bin/web": binary, "static/index.html": "<h1>hello</h1>"}
}

// requestReconcile sets the reconcile-request annotation, as `kubectl
// devloop push` does, and returns its value.
func requestReconcile(t *testing.T, env *v1alpha1.DevEnvironment) string {
	t.Helper()
	g := NewWithT(t)
	value := time.Now().Format(time.RFC3339Nano)
	g.Eventually(func() error {
		cur := &v1alpha1.DevEnvironment{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(env), cur); err != nil {
			return err
		}
		patch := client.MergeFrom(cur.DeepCopy())
		if cur.Annotations == nil {
			cur.Annotations = map[string]string{}
		}
		cur.Annotations[v1alpha1.ReconcileRequestAnnotation] = value
		return k8s.Patch(context.Background(), cur, patch)
	}, timeout).Should(Succeed())
	return value
}

func imageOf(env *v1alpha1.DevEnvironment, component, image string) *v1alpha1.ImageStatus {
	return env.Status.Component(component).Image(image)
}

func TestInProcessBuildPushesOnlyWhatChanged(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	srcDigest := reg.pushSource(t, ns+"/src", "dev", webSource("binary v1"))
	env := webEnv(ns)
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(imageOf(env, "web", "web")).NotTo(BeNil())
	})
	img := *imageOf(env, "web", "web")
	g.Expect(env.Status.Sources).To(HaveLen(1))
	g.Expect(env.Status.Sources[0].Digest).To(Equal(srcDigest.String()))
	g.Expect(env.Status.Sources[0].Revision).To(Equal("dev@" + srcDigest.String()))
	g.Expect(img.Repository).To(Equal(reg.host + "/" + ns + "/web"))
	g.Expect(img.Digest).To(Equal("sha256:" + img.ContentHash))
	// The content tag once (the template repeating it adds nothing), then
	// the revision tag; both name the pushed digest.
	g.Expect(img.Tags).To(Equal([]string{img.ContentHash, "rev-" + srcDigest.Hex[:12]}))
	for _, tag := range img.Tags {
		g.Expect(reg.tagDigest(t, ns+"/web", tag)).To(Equal(img.Digest), "tag %s", tag)
	}
	g.Expect(img.Revision).To(Equal(env.Status.Sources[0].Revision))
	expectKstatus(t, env, status.CurrentStatus)

	// A reconcile with nothing changed writes nothing to the registry.
	uploads, writes := reg.counts()
	request := requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		readyCurrent(g, env)
	})
	u, w := reg.counts()
	g.Expect(u-uploads).To(BeZero(), "blob uploads on a no-op reconcile")
	g.Expect(w-writes).To(BeZero(), "registry writes on a no-op reconcile")
	g.Expect(*imageOf(env, "web", "web")).To(Equal(img))

	// One changed file: one layer and the config are uploaded; the static
	// layer is already there.
	newSrc := reg.pushSource(t, ns+"/src", "dev", webSource("binary v2"))
	uploads, _ = reg.counts()
	_ = requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(imageOf(env, "web", "web").Digest).NotTo(Equal(img.Digest))
	})
	u, _ = reg.counts()
	// Pushing the new source itself happened before `uploads` was read.
	g.Expect(u-uploads).To(Equal(2), "uploads for a one-file change: its layer and the config")
	changed := imageOf(env, "web", "web")
	g.Expect(changed.Tags).To(Equal([]string{changed.ContentHash, "rev-" + newSrc.Hex[:12]}))
	g.Expect(reg.tagDigest(t, ns+"/web", changed.Tags[1])).To(Equal(changed.Digest))
	expectKstatus(t, env, status.CurrentStatus)
}

func TestRegistryDownWaitsThenHeals(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg.pushSource(t, ns+"/src", "dev", webSource("binary"))
	// Writes to this namespace's repositories fail as an overloaded
	// registry does; reads (the source) still work.
	down := func(r *http.Request) int {
		if strings.HasPrefix(r.URL.Path, "/v2/"+ns+"/web/") && r.Method != http.MethodGet && r.Method != http.MethodHead {
			return http.StatusServiceUnavailable
		}
		return 0
	}
	reg.setFault(down)
	defer reg.setFault(nil)
	env := webEnv(ns)
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := condition(env, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonWaiting), ready.Message)
		g.Expect(ready.Message).To(ContainSubstring("image web"))
		g.Expect(condition(env, v1alpha1.ConditionReconciling)).NotTo(BeNil())
		g.Expect(condition(env, v1alpha1.ConditionStalled)).To(BeNil())
	})
	g.Expect(imageOf(env, "web", "web").Tags).To(BeEmpty(), "no tag while the registry is down")
	expectKstatus(t, env, status.InProgressStatus)

	// The registry comes back: the environment heals without help.
	reg.setFault(nil)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(imageOf(env, "web", "web").Tags).To(HaveLen(2))
	})
	expectKstatus(t, env, status.CurrentStatus)
}

func TestDeniedPushStallsNamingTheRepository(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	reg.pushSource(t, ns+"/src", "dev", webSource("binary"))
	reg.setFault(func(r *http.Request) int {
		if strings.HasPrefix(r.URL.Path, "/v2/"+ns+"/web/") && (r.Method == http.MethodPost || r.Method == http.MethodPut) {
			return http.StatusForbidden
		}
		return 0
	})
	defer reg.setFault(nil)
	env := webEnv(ns)
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)

	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonBuildFailed))
		g.Expect(stalled.Message).To(ContainSubstring("push access denied to " + reg.host + "/" + ns + "/web: check credentialsRef"))
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	})
	g.Expect(env.Status.Components[0].Phase).To(Equal(v1alpha1.PhaseFailed))
	expectKstatus(t, env, status.FailedStatus)

	// Fixing the cause and touching the spec heals it.
	reg.setFault(nil)
	g.Eventually(func() error {
		cur := &v1alpha1.DevEnvironment{}
		if err := k8s.Get(context.Background(), key, cur); err != nil {
			return err
		}
		cur.Spec.Components[0].Images[0].Env = []v1alpha1.EnvVar{{Name: "RETRY", Value: "1"}}
		return k8s.Update(context.Background(), cur)
	}, timeout).Should(Succeed())
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) { readyCurrent(g, env) })
	expectKstatus(t, env, status.CurrentStatus)
}

func TestRegistryCredentialsFromDockerConfigSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	reg.pushSource(t, ns+"/src", "dev", webSource("binary"))
	const user, password = "dev", "s3cret-token"
	// The registry asks for basic auth everywhere while this test runs: the
	// source and the push both need the Secret's credentials.
	reg.setFault(func(r *http.Request) int {
		if u, p, ok := r.BasicAuth(); ok && u == user && p == password {
			return 0
		}
		return http.StatusUnauthorized
	})
	defer reg.setFault(nil)

	config := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, reg.host, base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regcred"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(config)},
	}
	g.Expect(k8s.Create(ctx, secret)).To(Succeed())
	opaque := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "opaque"},
		StringData: map[string]string{"password": password},
	}
	g.Expect(k8s.Create(ctx, opaque)).To(Succeed())

	// A Secret of the wrong type is named in the condition.
	env := webEnv(ns)
	env.Spec.Registry.CredentialsRef = &v1alpha1.LocalObjectReference{Name: "opaque"}
	env.Spec.Sources[0].OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: "regcred"}
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring("spec.registry.credentialsRef: Secret opaque is of type \"Opaque\""))
	})
	expectKstatus(t, env, status.FailedStatus)

	g.Eventually(func() error {
		cur := &v1alpha1.DevEnvironment{}
		if err := k8s.Get(ctx, key, cur); err != nil {
			return err
		}
		cur.Spec.Registry.CredentialsRef.Name = "regcred"
		return k8s.Update(ctx, cur)
	}, timeout).Should(Succeed())
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
	})
	img := imageOf(env, "web", "web")
	g.Expect(img.Tags).To(HaveLen(2))
	for _, c := range env.Status.Conditions {
		g.Expect(c.Message).NotTo(ContainSubstring(password))
	}
	expectKstatus(t, env, status.CurrentStatus)
}

func TestUnknownSourceTagStallsNamingTheSource(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	env := webEnv(ns)
	env.Spec.Sources[0].OCI.Tag = "missing"
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())

	env = eventually(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonSourceFailed))
		g.Expect(stalled.Message).To(ContainSubstring(`source "app"`))
		g.Expect(stalled.Message).To(ContainSubstring("missing"))
	})
	g.Expect(env.Status.Sources).To(ConsistOf(HaveField("Name", "app")))
	expectKstatus(t, env, status.FailedStatus)
}

func TestWipedRegistryIsPushedAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t)
	reg.pushSource(t, ns+"/src", "dev", webSource("binary"))
	env := webEnv(ns)
	g.Expect(k8s.Create(ctx, env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(imageOf(env, "web", "web")).NotTo(BeNil())
	})
	img := *imageOf(env, "web", "web")

	// The registry loses the image (a registry restarted without storage,
	// a garbage collection): its manifest is gone.
	req, err := http.NewRequest(http.MethodDelete, reg.URL+"/v2/"+ns+"/web/manifests/"+img.Digest, nil)
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusAccepted))

	request := requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		readyCurrent(g, env)
	})
	// The same inputs make the same image: pushed again under the same
	// digest, and every tag names it.
	g.Expect(imageOf(env, "web", "web").Digest).To(Equal(img.Digest))
	byDigest, err := name.NewDigest(reg.host+"/"+ns+"/web@"+img.Digest, name.Insecure)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = remote.Head(byDigest)
	g.Expect(err).NotTo(HaveOccurred(), "the manifest is back in the registry")
	for _, tag := range img.Tags {
		g.Expect(reg.tagDigest(t, ns+"/web", tag)).To(Equal(img.Digest), "tag %s", tag)
	}
	expectKstatus(t, env, status.CurrentStatus)
}

// TestImagePathsScopeRebuilds: two images from one source; the one naming
// paths is neither rebuilt nor re-tagged when only the other's files
// change, and is rebuilt when its own do. A missing path stalls, naming it.
func TestImagePathsScopeRebuilds(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	files := webSource("binary v1")
	files["validator/bin"] = "validator v1"
	reg.pushSource(t, ns+"/src", "dev", files)
	env := webEnv(ns)
	env.Spec.Components[0].Manifests = nil
	env.Spec.Components[0].Images = append(env.Spec.Components[0].Images, v1alpha1.ImageSpec{
		Name: "validator", Source: "app", Paths: []string{"validator"},
		Layers: []v1alpha1.LayerMapping{{From: "validator/bin", To: "/validator", Mode: "0755"}},
		Tags:   []string{"{{ .ContentHash }}", "rev-{{ .ShortRevision }}"},
	})
	g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
	key := client.ObjectKeyFromObject(env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(imageOf(env, "web", "validator")).NotTo(BeNil())
	})
	web, validator := *imageOf(env, "web", "web"), *imageOf(env, "web", "validator")
	g.Expect(validator.RevisionTag).To(Equal(validator.Tags[1]), "what imageValues from: Revision write")

	// Only web's file changes: web is rebuilt, the validator keeps its
	// digest, tags and revision, and nothing is pushed for it.
	files["bin/web"] = "binary v2"
	reg.pushSource(t, ns+"/src", "dev", files)
	_ = requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(imageOf(env, "web", "web").Digest).NotTo(Equal(web.Digest))
	})
	g.Expect(*imageOf(env, "web", "validator")).To(Equal(validator))

	// Its own file changes: it is rebuilt under the new revision.
	files["validator/bin"] = "validator v2"
	newSrc := reg.pushSource(t, ns+"/src", "dev", files)
	_ = requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		readyCurrent(g, env)
		g.Expect(imageOf(env, "web", "validator").Digest).NotTo(Equal(validator.Digest))
	})
	g.Expect(imageOf(env, "web", "validator").Tags[1]).To(Equal("rev-" + newSrc.Hex[:12]))
	expectKstatus(t, env, status.CurrentStatus)

	// A path the source does not have stalls the environment, naming it.
	delete(files, "validator/bin")
	reg.pushSource(t, ns+"/src", "dev", files)
	_ = requestReconcile(t, env)
	env = eventually(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := condition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring(`image validator: paths[0]: path "validator" is not in the source`))
	})
	expectKstatus(t, env, status.FailedStatus)
}

// TestTagMovedByAnotherEnvironmentIsReported: two environments push one
// image name to one repository under the same fixed tag; the second push
// moves the tag away from the first's digest, which the second did not
// push, and says so in a Warning event.
func TestTagMovedByAnotherEnvironmentIsReported(t *testing.T) {
	g := NewWithT(t)
	shared := reg.host + "/shared-" + newNamespace(t)
	var envs []*v1alpha1.DevEnvironment
	for i, binary := range []string{"first binary", "second binary"} {
		ns := newNamespace(t)
		reg.pushSource(t, ns+"/src", "dev", webSource(binary))
		env := webEnv(ns)
		env.Spec.Registry.Prefix = shared
		env.Spec.Components[0].Manifests = nil
		env.Spec.Components[0].Images[0].Tags = []string{"{{ .ContentHash }}", "latest"}
		g.Expect(k8s.Create(context.Background(), env)).To(Succeed())
		envs = append(envs, eventually(t, client.ObjectKeyFromObject(env), readyCurrent))
		if i == 0 {
			continue
		}
		first := imageOf(envs[0], "web", "web").Digest
		expectEvent(t, ns, v1alpha1.ReasonTagMoved, "tag latest named "+first+", which this environment did not push")
	}
	g.Expect(reg.tagDigest(t, strings.TrimPrefix(shared, reg.host+"/")+"/web", "latest")).To(Equal(imageOf(envs[1], "web", "web").Digest))
}
