package build_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"github.com/google/go-containerregistry/pkg/v1/random"
	. "github.com/onsi/gomega"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/build"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/pods"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// widgetCRD is what `make manifests` generates into config/crd/bases:
// a CRD of group, with extra lines at the end of its schema.
func widgetCRD(group, extra string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.%[1]s
spec:
  group: %[1]s
  names: {kind: Widget, listKind: WidgetList, plural: widgets, singular: widget%[2]s}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group, extra)
}

// operatorWithGeneratedCRDs is an operator project's loop: a run step
// (make manifests) whose output config/crd/bases a later component
// applies through the output source crds.
func operatorWithGeneratedCRDs(ns string) *v1alpha1.DevEnvironment {
	operator := v1alpha1.Component{Name: "operator", Images: []v1alpha1.ImageSpec{{
		Name: "operator", Source: builder.AppSource,
		Run: &v1alpha1.BuildRun{
			Image:   "golang:1.25",
			Command: []string{"make", "manifests"},
			Outputs: []v1alpha1.RunOutput{{Name: "crds", Path: "config/crd/bases"}},
		},
	}}}
	return operatortest.Env(ns, "operator").ServiceAccount(operatortest.Deployer).Registry().AppSource().
		Source(v1alpha1.Source{Name: "crds", Output: &v1alpha1.BuildOutputReference{Image: "operator", Name: "crds"}}).
		Components(operator, v1alpha1.Component{Name: "crds", Manifests: &v1alpha1.ManifestsSpec{Source: "crds"}}).Obj()
}

// flagValue is the value of flag in a helper's arguments.
func flagValue(g Gomega, args []string, flag string) string {
	i := slices.Index(args, flag)
	g.Expect(i).To(BeNumerically(">", 0), "%s in %v", flag, args)
	return args[i+1]
}

// assembleArg is the value of flag on a builder Job's assemble container.
func assembleArg(g Gomega, job *batchv1.Job, flag string) string {
	return flagValue(g, job.Spec.Template.Spec.Containers[0].Args, flag)
}

// assembleOutputs does what a builder Job's assemble container does with
// a workspace holding files: see pushAsTheHelper.
func assembleOutputs(t *testing.T, job *batchv1.Job, files map[string]string) (string, error) {
	return pushAsTheHelper(t, job.Spec.Template.Spec.Containers[0].Args, files)
}

// pushAsTheHelper does what the helper's push (a Job's assemble
// container, a warm builder's push step) does with a workspace holding
// files, given its arguments: it packs and pushes the outputs --outputs
// names, with the operator's own code, pushes a platform image, and
// returns its report. An output that cannot be packed returns the error
// the helper would print.
func pushAsTheHelper(t *testing.T, args []string, files map[string]string) (string, error) {
	t.Helper()
	g := NewWithT(t)
	var outputs []image.OutputSpec
	g.Expect(json.Unmarshal([]byte(flagValue(g, args, "--outputs")), &outputs)).To(Succeed())
	var regCfg build.RegistryConfig
	g.Expect(json.Unmarshal([]byte(flagValue(g, args, "--registry")), &regCfg)).To(Succeed())
	b, err := image.NewBuilder(image.Registry{Prefix: regCfg.Prefix, Insecure: regCfg.Insecure})
	g.Expect(err).NotTo(HaveOccurred())

	dir := t.TempDir()
	for p, content := range files {
		g.Expect(os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755)).To(Succeed())
		g.Expect(os.WriteFile(filepath.Join(dir, p), []byte(content), 0o644)).To(Succeed())
	}
	ctx := context.Background()
	reports, err := b.PushOutputs(ctx, "operator", dir, outputs)
	if err != nil {
		return "", err
	}
	img, err := random.Image(256, 1)
	g.Expect(err).NotTo(HaveOccurred())
	d, _, err := b.PushImage(ctx, "operator", img)
	g.Expect(err).NotTo(HaveOccurred())
	report, err := json.Marshal(build.AssembleReport{Digest: d.String(), Uploaded: 2, Outputs: reports})
	g.Expect(err).NotTo(HaveOccurred())
	return string(report), nil
}

// rebuildOperator changes the run step's command, so the image is built
// again by a new builder Job, and returns that Job.
func rebuildOperator(t *testing.T, key client.ObjectKey, previous string, command ...string) batchv1.Job {
	t.Helper()
	g := NewWithT(t)
	operatortest.EditSpec(t, key, func(cur *v1alpha1.DevEnvironment) {
		cur.Spec.Components[0].Images[0].Run.Command = command
	})
	var job batchv1.Job
	g.Eventually(func(g Gomega) {
		jobs := operatortest.BuilderJobs(g, key.Namespace)
		g.Expect(jobs).To(HaveKey("linux-amd64"))
		job = jobs["linux-amd64"]
		g.Expect(job.Name).NotTo(Equal(previous))
	}, operatortest.Timeout).Should(Succeed())
	return job
}

func finishAssemble(t *testing.T, job *batchv1.Job, report string) {
	t.Helper()
	finishJob(t, job,
		[]corev1.ContainerStatus{operatortest.Terminated(pods.ContainerFetch, 0, ""), operatortest.Terminated(build.ContainerBuild, 0, "")},
		[]corev1.ContainerStatus{operatortest.Terminated(build.ContainerAssemble, 0, report)}, true)
}

// TestBuildOutputIsDeployedByALaterComponent: a run step generates CRDs
// (make manifests); the builder's assemble container pushes the output
// config/crd/bases next to the image, the image's status records it, and
// a later component applies it through the output source crds, whose
// status says which build it is. The same files built again are the
// same digest and change nothing; a changed CRD rolls out; an output the
// build did not write stalls the environment naming its field.
func TestBuildOutputIsDeployedByALaterComponent(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	operatortest.AllowCRDs(t, ns, "deployer")
	group := ns + ".devloop.dev"
	crdName := "widgets." + group
	t.Cleanup(func() {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
		crd.SetName(crdName)
		_ = operatortest.Admin.Delete(context.Background(), crd)
	})
	operatortest.AppFiles(t, ns, map[string]string{"Makefile": "manifests:\n\tcontroller-gen crd paths=./... output:crd:dir=config/crd/bases\n"})
	env := operatorWithGeneratedCRDs(ns)
	key := operatortest.CreateEnv(t, env)

	// The consumer waits for the image that produces its source.
	job := operatortest.WaitForBuilderJob(t, ns, "linux-amd64")
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		g.Expect(env.Status.Component("operator")).NotTo(BeNil())
		g.Expect(env.Status.Component("operator").Phase).To(Equal(v1alpha1.PhaseBuilding))
		g.Expect(env.Status.Component("crds")).NotTo(BeNil())
		g.Expect(env.Status.Component("crds").Phase).To(Equal(v1alpha1.PhaseBlocked))
	})
	g.Expect(env.Status.Sources).To(ContainElement(v1alpha1.SourceStatus{Name: "crds"}), "no revision before the build")
	operatortest.ExpectKstatus(t, env, status.InProgressStatus)
	// Only the container that pushes packs outputs, never the build's.
	for _, c := range job.Spec.Template.Spec.InitContainers {
		g.Expect(c.Args).NotTo(ContainElement("--outputs"), c.Name)
	}
	g.Expect(assembleArg(g, &job, "--outputs")).To(ContainSubstring(`"field":"spec.components[0].images[0].run.outputs[0]"`))

	files := map[string]string{"config/crd/bases/widgets.yaml": widgetCRD(group, ""), "bin/manager": "binary"}
	report, err := assembleOutputs(t, &job, files)
	g.Expect(err).NotTo(HaveOccurred())
	finishAssemble(t, &job, report)

	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
	})
	img := env.Status.Component("operator").Image("operator")
	g.Expect(img.Outputs).To(HaveLen(1))
	out := img.Outputs[0]
	g.Expect(out.Name).To(Equal("crds"))
	g.Expect(out.Repository).To(Equal(operatortest.Registry.Host + "/" + ns + "/operator/outputs/crds"))
	g.Expect(operatortest.Registry.TagDigest(t, ns+"/operator/outputs/crds", img.ContentHash)).To(Equal(out.Digest), "tagged with the image's content tag")
	var crdsSource *v1alpha1.SourceStatus
	for i := range env.Status.Sources {
		if env.Status.Sources[i].Name == "crds" {
			crdsSource = &env.Status.Sources[i]
		}
	}
	g.Expect(crdsSource).NotTo(BeNil())
	g.Expect(crdsSource.Revision).To(Equal("operator/crds@" + out.Digest))
	g.Expect(crdsSource.Digest).To(Equal(out.Digest))
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed(), "the generated CRD is applied")
	applied := crd.GetResourceVersion()
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// Built again (another command), the same generated files: the same
	// output digest, and the CRD is left alone.
	job = rebuildOperator(t, key, job.Name, "make", "manifests", "generate")
	report, err = assembleOutputs(t, &job, files)
	g.Expect(err).NotTo(HaveOccurred())
	finishAssemble(t, &job, report)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		g.Expect(env.Status.Component("operator").Image("operator").Build.Job).To(Equal(job.Name))
	})
	g.Expect(env.Status.Component("operator").Image("operator").Outputs).To(Equal([]v1alpha1.OutputStatus{out}))
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
	g.Expect(crd.GetResourceVersion()).To(Equal(applied), "an unchanged output changes nothing")

	// A changed CRD: a new digest, which the consumer applies.
	job = rebuildOperator(t, key, job.Name, "make", "-B", "manifests")
	files["config/crd/bases/widgets.yaml"] = widgetCRD(group, ", shortNames: [wd]")
	report, err = assembleOutputs(t, &job, files)
	g.Expect(err).NotTo(HaveOccurred())
	finishAssemble(t, &job, report)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		operatortest.ExpectReadyAndCurrent(g, env)
		outputs := env.Status.Component("operator").Image("operator").Outputs
		g.Expect(outputs).To(HaveLen(1))
		g.Expect(outputs[0].Digest).NotTo(Equal(out.Digest))
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: crdName}, crd)).To(Succeed())
		short, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
		g.Expect(short).To(Equal([]string{"wd"}))
	})
	g.Expect(env.Status.Sources).To(ContainElement(HaveField("Revision", "operator/crds@"+env.Status.Component("operator").Image("operator").Outputs[0].Digest)))
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)

	// A build that does not write the output: the assemble container
	// fails with the error PushOutputs gives, which names the field.
	job = rebuildOperator(t, key, job.Name, "make", "generate")
	_, missing := assembleOutputs(t, &job, map[string]string{"bin/manager": "binary"})
	g.Expect(missing).To(HaveOccurred())
	operatortest.PodLogs.Set(ns, job.Name+"-"+string(job.UID)[:5], build.ContainerAssemble, "Error: "+missing.Error()+"\n")
	finishJob(t, &job,
		[]corev1.ContainerStatus{operatortest.Terminated(pods.ContainerFetch, 0, ""), operatortest.Terminated(build.ContainerBuild, 0, "")},
		[]corev1.ContainerStatus{operatortest.Terminated(build.ContainerAssemble, 1, "")}, false)
	env = operatortest.WaitForEnv(t, key, func(g Gomega, env *v1alpha1.DevEnvironment) {
		stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Reason).To(Equal(v1alpha1.ReasonBuildFailed))
		g.Expect(stalled.Message).To(ContainSubstring(
			"spec.components[0].images[0].run.outputs[0]: directory config/crd/bases does not exist in the workspace after the run step"))
	})
	operatortest.ExpectKstatus(t, env, status.FailedStatus)
}

// TestWarmBuildOutputIsDeployed: with run.keepWarm the outputs go to the
// push step, exec'd into the warm builder's fetch-push container, and its
// report on stdout brings them back; the generated CRD is applied.
func TestWarmBuildOutputIsDeployed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.DeployNamespace(t)
	operatortest.AllowCRDs(t, ns, "deployer")
	group := ns + ".devloop.dev"
	crd := &unstructured.Unstructured{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	t.Cleanup(func() {
		gone := crd.DeepCopy()
		gone.SetName("widgets." + group)
		_ = operatortest.Admin.Delete(context.Background(), gone)
	})
	operatortest.AppFiles(t, ns, map[string]string{"Makefile": "manifests: # " + ns + "\n"})
	env := operatorWithGeneratedCRDs(ns)
	env.Spec.Components[0].Images[0].Run.KeepWarm = true
	var pushArgs []string
	operatortest.WarmExec.Answer(func(command []string, stdout, stderr io.Writer) error {
		if slices.Contains(command, "--outputs") && !operatortest.IsStep(command, build.WarmStepPush) {
			return fmt.Errorf("step %v was given the outputs", command)
		}
		if !operatortest.IsStep(command, build.WarmStepPush) {
			return nil
		}
		if !slices.Contains(command, "--outputs") || !slices.Contains(command, "--registry") {
			// Not a failed assertion: this runs outside the test's goroutine.
			return fmt.Errorf("push step %v without --outputs", command)
		}
		pushArgs = command
		report, err := pushAsTheHelper(t, command, map[string]string{"config/crd/bases/widgets.yaml": widgetCRD(group, "")})
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", report)
		return err
	})
	t.Cleanup(func() { operatortest.WarmExec.Answer(func([]string, io.Writer, io.Writer) error { return nil }) })
	key := operatortest.CreateEnv(t, env)

	operatortest.RunPod(t, ns, build.WarmPodName("operator", "operator", "linux/amd64"))

	env = operatortest.WaitForEnv(t, key, operatortest.ExpectReadyAndCurrent)
	g.Expect(pushArgs).NotTo(BeNil(), "the push step ran")
	outputs := env.Status.Component("operator").Image("operator").Outputs
	g.Expect(outputs).To(HaveLen(1))
	g.Expect(env.Status.Sources).To(ContainElement(HaveField("Revision", "operator/crds@"+outputs[0].Digest)))
	g.Expect(operatortest.Admin.Get(ctx, client.ObjectKey{Name: "widgets." + group}, crd)).To(Succeed(), "the generated CRD is applied")
	operatortest.ExpectKstatus(t, env, status.CurrentStatus)
}
