package build_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

func TestInProcessBuildPushesOnlyWhatChanged(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	srcDigest := operatortest.AppFiles(t, ns, operatortest.WebFiles("binary v1"))
	env := operatortest.WebEnv(ns)
	key := operatortest.CreateEnv(t, env)

	env = waitForWebBuilt(t, key)
	img := *env.Status.Component("web").Image("web")
	g.Expect(env.Status.Sources).To(HaveLen(1))
	g.Expect(env.Status.Sources[0].Digest).To(Equal(srcDigest.String()))
	g.Expect(env.Status.Sources[0].Revision).To(Equal("dev@" + srcDigest.String()))
	g.Expect(img.Repository).To(Equal(operatortest.Registry.Host + "/" + ns + "/web"))
	g.Expect(img.Digest).To(Equal("sha256:" + img.ContentHash))
	// The content tag once (the template repeating it adds nothing), then
	// the revision tag; both name the pushed digest.
	g.Expect(img.Tags).To(Equal([]string{img.ContentHash, "rev-" + srcDigest.Hex[:12]}))
	for _, tag := range img.Tags {
		g.Expect(operatortest.Registry.TagDigest(t, ns+"/web", tag)).To(Equal(img.Digest), "tag %s", tag)
	}
	g.Expect(img.Revision).To(Equal(env.Status.Sources[0].Revision))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// A reconcile with nothing changed writes nothing to the registry.
	uploads, writes := operatortest.Registry.Counts()
	request := operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	u, w := operatortest.Registry.Counts()
	g.Expect(u-uploads).To(BeZero(), "blob uploads on a no-op reconcile")
	g.Expect(w-writes).To(BeZero(), "registry writes on a no-op reconcile")
	g.Expect(*env.Status.Component("web").Image("web")).To(Equal(img))

	// One changed file: one layer and the config are uploaded; the static
	// layer is already there.
	newSrc := operatortest.AppFiles(t, ns, operatortest.WebFiles("binary v2"))
	uploads, _ = operatortest.Registry.Counts()
	_ = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("web").Image("web").Digest).NotTo(Equal(img.Digest))
	})
	u, _ = operatortest.Registry.Counts()
	// Pushing the new source itself happened before `uploads` was read.
	g.Expect(u-uploads).To(Equal(2), "uploads for a one-file change: its layer and the config")
	changed := env.Status.Component("web").Image("web")
	g.Expect(changed.Tags).To(Equal([]string{changed.ContentHash, "rev-" + newSrc.Hex[:12]}))
	g.Expect(operatortest.Registry.TagDigest(t, ns+"/web", changed.Tags[1])).To(Equal(changed.Digest))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

func TestRegistryDownWaitsThenHeals(t *testing.T) {
	g := NewWithT(t)
	ns := webNamespace(t)
	// Writes to this namespace's repositories fail as an overloaded
	// registry does; reads (the source) still work.
	down := func(r *http.Request) int {
		if strings.HasPrefix(r.URL.Path, "/v2/"+ns+"/web/") && r.Method != http.MethodGet && r.Method != http.MethodHead {
			return http.StatusServiceUnavailable
		}
		return 0
	}
	operatortest.Registry.SetFault(down)
	defer operatortest.Registry.SetFault(nil)
	env := operatortest.WebEnv(ns)
	key := operatortest.CreateEnv(t, env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		ready := operatortest.EnvCondition(env, v1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(v1alpha1.ReasonWaiting), ready.Message)
		g.Expect(ready.Message).To(ContainSubstring("image web"))
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionReconciling)).NotTo(BeNil())
		g.Expect(operatortest.EnvCondition(env, v1alpha1.ConditionStalled)).To(BeNil())
	})
	g.Expect(env.Status.Component("web").Image("web").Tags).To(BeEmpty(), "no tag while the registry is down")
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)

	// The registry comes back: the environment heals without help.
	operatortest.Registry.SetFault(nil)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("web").Image("web").Tags).To(HaveLen(2))
	})
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

func TestDeniedPushStallsNamingTheRepository(t *testing.T) {
	g := NewWithT(t)
	ns := webNamespace(t)
	operatortest.Registry.SetFault(func(r *http.Request) int {
		if strings.HasPrefix(r.URL.Path, "/v2/"+ns+"/web/") && (r.Method == http.MethodPost || r.Method == http.MethodPut) {
			return http.StatusForbidden
		}
		return 0
	})
	defer operatortest.Registry.SetFault(nil)
	env := operatortest.WebEnv(ns)
	key := operatortest.CreateEnv(t, env)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonBuildFailed))
		g.Expect(stalled.Message).To(ContainSubstring("push access denied to " + operatortest.Registry.Host + "/" + ns + "/web: check credentialsRef"))
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
	})
	g.Expect(env.Status.Components[0].Phase).To(Equal(v1alpha1.PhaseFailed))
	operatortest.ExpectKstatus(t, env, status.FailedStatus)

	// Fixing the cause and touching the spec heals it.
	operatortest.Registry.SetFault(nil)
	operatortest.EditSpec(t, key, func(cur *v1alpha1.DevEnvironment) {
		cur.Spec.Components[0].Images[0].Env = []v1alpha1.EnvVar{{Name: "RETRY", Value: "1"}}
	})
	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

func TestRegistryCredentialsFromDockerConfigSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := webNamespace(t)
	const user, password = "dev", "s3cret-token"
	// The registry asks for basic auth everywhere while this test runs: the
	// source and the push both need the Secret's credentials.
	operatortest.Registry.SetFault(func(r *http.Request) int {
		if u, p, ok := r.BasicAuth(); ok && u == user && p == password {
			return 0
		}
		return http.StatusUnauthorized
	})
	defer operatortest.Registry.SetFault(nil)

	config := fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, operatortest.Registry.Host, base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regcred"},
		Type:       corev1.SecretTypeDockerConfigJson,
		Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(config)},
	}
	g.Expect(operatortest.Admin.Create(ctx, secret)).To(Succeed())
	opaque := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "opaque"},
		StringData: map[string]string{"password": password},
	}
	g.Expect(operatortest.Admin.Create(ctx, opaque)).To(Succeed())

	// A Secret of the wrong type is named in the condition.
	env := operatortest.WebEnv(ns)
	env.Spec.Registry.CredentialsRef = &v1alpha1.LocalObjectReference{Name: "opaque"}
	env.Spec.Sources[0].OCI.SecretRef = &v1alpha1.LocalObjectReference{Name: "regcred"}
	key := operatortest.CreateEnv(t, env)
	env = operatortest.WaitForStalled(t, key, "", "spec.registry.credentialsRef: Secret opaque is of type \"Opaque\"")
	operatortest.ExpectKstatus(t, env, status.FailedStatus)

	operatortest.EditSpec(t, key, func(cur *v1alpha1.DevEnvironment) {
		cur.Spec.Registry.CredentialsRef.Name = "regcred"
	})
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	img := env.Status.Component("web").Image("web")
	g.Expect(img.Tags).To(HaveLen(2))
	for _, c := range env.Status.Conditions {
		g.Expect(c.Message).NotTo(ContainSubstring(password))
	}
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// TestMissingSourceDigestStallsNamingTheSource: a digest the registry
// does not have is a mistake to fix (a tag not pushed yet is waited for
// instead: internal/source's TestEnvironmentWaitsForTheFirstPush).
func TestMissingSourceDigestStallsNamingTheSource(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	env := operatortest.WebEnv(ns)
	missing := "sha256:" + strings.Repeat("a", 64)
	env.Spec.Sources[0].OCI.Tag, env.Spec.Sources[0].OCI.Digest = "", missing
	g.Expect(operatortest.Admin.Create(context.Background(), env)).To(Succeed())

	env = operatortest.WaitForStalled(t, client.ObjectKeyFromObject(env), v1alpha1.ReasonSourceFailed, `source "app"`, missing, "not found")
	g.Expect(env.Status.Sources).To(ConsistOf(HaveField("Name", "app")))
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

func TestWipedRegistryIsPushedAgain(t *testing.T) {
	g := NewWithT(t)
	ns := webNamespace(t)
	env := operatortest.WebEnv(ns)
	key := operatortest.CreateEnv(t, env)
	env = waitForWebBuilt(t, key)
	img := *env.Status.Component("web").Image("web")

	// The registry loses the image (a registry restarted without storage,
	// a garbage collection): its manifest is gone.
	wipeManifest(g, ns+"/web", img.Digest)

	request := operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.LastHandledReconcileAt).To(Equal(request))
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	// The same inputs make the same image: pushed again under the same
	// digest, and every tag names it.
	g.Expect(env.Status.Component("web").Image("web").Digest).To(Equal(img.Digest))
	expectPushed(t, g, ns+"/web", &img)
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}

// TestImagePathsScopeRebuilds: two images from one source; the one naming
// paths is neither rebuilt nor re-tagged when only the other's files
// change, and is rebuilt when its own do. A missing path stalls, naming it.
func TestImagePathsScopeRebuilds(t *testing.T) {
	g := NewWithT(t)
	ns := operatortest.Namespace(t)
	files := operatortest.WebFiles("binary v1")
	files["validator/bin"] = "validator v1"
	operatortest.AppFiles(t, ns, files)
	env := operatortest.WebEnv(ns)
	env.Spec.Components[0].Manifests = nil
	env.Spec.Components[0].Images = append(env.Spec.Components[0].Images, v1alpha1.ImageSpec{
		Name: "validator", Source: "app", Paths: []string{"validator"},
		Layers: []v1alpha1.LayerMapping{{From: "validator/bin", To: "/validator", Mode: "0755"}},
		Tags:   []string{"{{ .ContentHash }}", "rev-{{ .ShortRevision }}"},
	})
	key := operatortest.CreateEnv(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("web").Image("validator")).NotTo(BeNil())
	})
	web, validator := *env.Status.Component("web").Image("web"), *env.Status.Component("web").Image("validator")
	g.Expect(validator.RevisionTag).To(Equal(validator.Tags[1]), "what imageValues from: Revision write")

	// Only web's file changes: web is rebuilt, the validator keeps its
	// digest, tags and revision, and nothing is pushed for it.
	files["bin/web"] = "binary v2"
	operatortest.AppFiles(t, ns, files)
	_ = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("web").Image("web").Digest).NotTo(Equal(web.Digest))
	})
	g.Expect(*env.Status.Component("web").Image("validator")).To(Equal(validator))

	// Its own file changes: it is rebuilt under the new revision.
	files["validator/bin"] = "validator v2"
	newSrc := operatortest.AppFiles(t, ns, files)
	_ = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("web").Image("validator").Digest).NotTo(Equal(validator.Digest))
	})
	g.Expect(env.Status.Component("web").Image("validator").Tags[1]).To(Equal("rev-" + newSrc.Hex[:12]))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// A path the source does not have stalls the environment, naming it.
	delete(files, "validator/bin")
	operatortest.AppFiles(t, ns, files)
	_ = operatortest.RequestReconcile(t, env)
	env = operatortest.WaitForStalled(t, key, "", `image validator: paths[0]: path "validator" is not in the source`)
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

// TestTagMovedByAnotherEnvironmentIsRefused: two environments of two
// namespaces push one image name to one repository under the same fixed
// tag. The second push would move the tag away from the first's digest,
// which the second did not push: it is refused (Stalled, naming the tag,
// the repository and the first environment) and the tag stays. The second
// alone saying its repository is shared does not take the first's tag;
// once both say so, the tag moves and a Warning event names the first.
func TestTagMovedByAnotherEnvironmentIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	shared := operatortest.Registry.Host + "/shared-" + operatortest.Namespace(t)
	repo := strings.TrimPrefix(shared, operatortest.Registry.Host+"/") + "/web"
	create := func(binary string) *v1alpha1.DevEnvironment {
		ns := operatortest.Namespace(t)
		operatortest.AppFiles(t, ns, operatortest.WebFiles(binary))
		env := operatortest.WebEnv(ns)
		env.Spec.Registry.Prefix = shared
		env.Spec.Components[0].Manifests = nil
		env.Spec.Components[0].Images[0].Tags = []string{"{{ .ContentHash }}", "latest"}
		g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
		return env
	}
	firstEnv := create("first binary")
	first := operatortest.WaitForEnv(t, client.ObjectKeyFromObject(firstEnv), operatortest.ExpectReadyAndCurrent).
		Status.Component("web").Image("web").Digest
	owner := firstEnv.Namespace + "/" + firstEnv.Name
	second := operatortest.WaitForStalled(t, client.ObjectKeyFromObject(create("second binary")), v1alpha1.ReasonTagMoved,
		"image web: tag latest in "+shared+"/web names "+first[:len("sha256:")+12]+", pushed by environment "+owner,
		"spec.registry.prefix", "sharedRepository: true on both images")
	operatortest.ExpectKstatus(t, second, status.FailedStatus)
	g.Expect(operatortest.Registry.TagDigest(t, repo, "latest")).To(Equal(first))

	operatortest.EditSpec(t, client.ObjectKeyFromObject(second), func(env *v1alpha1.DevEnvironment) {
		env.Spec.Components[0].Images[0].SharedRepository = true
	})
	second = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(second), func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.ObservedGeneration).To(Equal(env.Generation))
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Message).To(ContainSubstring("pushed by environment " + owner + ", which does not share it"))
	})
	g.Expect(operatortest.Registry.TagDigest(t, repo, "latest")).To(Equal(first))

	operatortest.EditSpec(t, client.ObjectKeyFromObject(firstEnv), func(env *v1alpha1.DevEnvironment) {
		env.Spec.Components[0].Images[0].SharedRepository = true
	})
	_ = operatortest.RequestReconcile(t, second)
	second = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(second), operatortest.ExpectReadyAndCurrent)
	operatortest.ExpectEvent(t, second.Namespace, v1alpha1.ReasonTagMoved, "tag latest named "+first+", which this environment did not push")
	operatortest.ExpectEvent(t, second.Namespace, v1alpha1.ReasonTagMoved, "environment "+owner+" pushes to")
	g.Expect(operatortest.Registry.TagDigest(t, repo, "latest")).To(Equal(second.Status.Component("web").Image("web").Digest))
}
