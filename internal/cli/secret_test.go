package cli

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/internal/testfiles"
	"github.com/devloop-dev/devloop/test/builder"
)

// referencingEnv names a Secret or ConfigMap in every place a spec can:
// the registry's credentials, a git source's, a chart registry's, and two
// valuesFrom (a ConfigMap and a Secret's key extra.yaml).
func referencingEnv() *builder.EnvSpec {
	return fixtureEnv("", "").RegistryCredentials("regcred").
		Source(builder.GitSource("app", "https://git.test/team/app.git")).SourceSecret("app", "git-creds").
		ChartCredentials("oci://charts.test/team", "regcred").
		Components(builder.Component("operator", builder.Chart("deployments/gpu-operator", builder.ValuesFrom(
			v1alpha1.ValuesReference{Kind: "ConfigMap", Name: "dev-settings", Optional: true},
			v1alpha1.ValuesReference{Kind: "Secret", Name: "gpu-secrets", Key: "extra.yaml"},
		))))
}

// referencingSpec is referencingEnv's spec.
func referencingSpec() v1alpha1.DevEnvironmentSpec { return referencingEnv().Spec() }

func getSecret(t *testing.T, ns, name string) *corev1.Secret {
	t.Helper()
	s := &corev1.Secret{}
	if err := k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
		t.Fatal(err)
	}
	return s
}

func absent(t *testing.T, obj client.Object) {
	t.Helper()
	err := k8s.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if !apierrors.IsNotFound(err) {
		t.Fatalf("%s exists (or %v); want nothing written", obj.GetName(), err)
	}
}

func expectOutput(t *testing.T, r result, code int, stdout, stderr []string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d:\n%s", r.code, code, r)
	}
	for _, s := range stdout {
		if !strings.Contains(r.out, s) {
			t.Errorf("stdout lacks %q", s)
		}
	}
	for _, s := range stderr {
		if !strings.Contains(r.err, s) {
			t.Errorf("stderr lacks %q", s)
		}
	}
	if t.Failed() {
		t.Fatal(r)
	}
}

// The registry Secret from a docker config: written by server-side apply
// as kubectl-devloop, labelled for the environment, every field that uses
// it named, the environment asked to reconcile; the same again changes
// nothing and asks nothing; a typo is warned about; a Secret's type is
// never silently changed; no value is ever printed.
func TestSecretCommand(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "gpu", referencingSpec())
	// Every run is checked for the values it was given.
	run := func(args ...string) result {
		t.Helper()
		r := plugin(t, append(args, "-n", ns)...)
		if strings.Contains(r.out+r.err, "hunter2") || strings.Contains(r.out+r.err, "ZGV2Omh1bnRlcjI") {
			t.Fatalf("a value was printed:\n%s", r)
		}
		return r
	}
	dir := t.TempDir()
	config := filepath.Join(dir, "config.json")
	testfiles.Write(t, dir, map[string]string{"config.json": `{"auths": {"registry.test": {"auth": "ZGV2Omh1bnRlcjI="}}, "credsStore": "none-needed"}`})

	r := run("secret", "gpu", "regcred", "--docker-config", config)
	expectOutput(t, r, 0, []string{
		"created secret/regcred in namespace " + ns + ": keys .dockerconfigjson (kubernetes.io/dockerconfigjson)",
		"registries: registry.test",
		"used by devenvironment/gpu: spec.registry.credentialsRef, spec.chartCredentials[0].secretRef",
		"asked devenvironment/gpu to reconcile",
	}, nil)
	if r.err != "" {
		t.Fatalf("a warning for a Secret the spec uses as written:\n%s", r)
	}
	t.Logf("first write:\n%s", r.out)
	sec := getSecret(t, ns, "regcred")
	if sec.Type != corev1.SecretTypeDockerConfigJson || sec.Labels[v1alpha1.LabelEnvironment] != "gpu" {
		t.Fatalf("type %s labels %v", sec.Type, sec.Labels)
	}
	if !strings.Contains(string(sec.Data[corev1.DockerConfigJsonKey]), `"registry.test":{"auth":"ZGV2Omh1bnRlcjI="}`) {
		t.Fatalf(".dockerconfigjson: %s", sec.Data[corev1.DockerConfigJsonKey])
	}
	applied := false
	for _, m := range sec.ManagedFields {
		applied = applied || (m.Manager == fieldManager && m.Operation == metav1.ManagedFieldsOperationApply)
	}
	if !applied {
		t.Fatalf("not applied by %s: %+v", fieldManager, sec.ManagedFields)
	}
	token := getEnv(t, ns, "gpu").Annotations[v1alpha1.ReconcileRequestAnnotation]
	if token == "" {
		t.Fatal("no reconcile requested")
	}

	// Again: unchanged, and the environment is left alone.
	r = run("secret", "gpu", "regcred", "--docker-config="+config)
	expectOutput(t, r, 0, []string{"unchanged secret/regcred"}, nil)
	if strings.Contains(r.out, "asked") || getEnv(t, ns, "gpu").Annotations[v1alpha1.ReconcileRequestAnnotation] != token {
		t.Fatalf("an unchanged Secret asked for a reconcile:\n%s", r)
	}

	// A Secret's type is immutable: refused with what to do.
	r = run("secret", "gpu", "regcred", "--from-literal", "password=hunter2")
	expectOutput(t, r, 1, nil, []string{"secret/regcred exists with type kubernetes.io/dockerconfigjson", "kubectl delete secret regcred -n " + ns})

	// A typo: written, with a warning that lists what the spec names.
	r = run("secret", "gpu", "regcrd", "--from-literal", "password=hunter2")
	expectOutput(t, r, 0, []string{"created secret/regcrd"}, []string{
		"Warning: devenvironment/gpu does not reference secret/regcrd (it names the Secrets git-creds, gpu-secrets, regcred and the ConfigMaps dev-settings): a typo?",
	})
	t.Logf("a typo:\n%s", r)
	// A Secret the field cannot use as written.
	r = run("secret", "gpu", "git-creds", "--from-literal", "token=hunter2")
	expectOutput(t, r, 0, []string{"used by devenvironment/gpu: spec.sources[0].git.secretRef"},
		[]string{"Warning: spec.sources[0].git.secretRef reads keys username and password (HTTPS) or identity and known_hosts (SSH)"})

	// --dry-run: redacted, validated, not written.
	r = run("secret", "gpu", "app-secrets", "--from-literal", "password=hunter2", "--dry-run")
	expectOutput(t, r, 0, []string{"kind: Secret", "password: '<redacted: 7 bytes>'", v1alpha1.LabelEnvironment + ": gpu", "# dry run: secret/app-secrets accepted by the API server, nothing written"}, nil)
	absent(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app-secrets"}})
	t.Logf("dry run:\n%s", r.out)

	// Before its environment exists: written, with a warning.
	r = run("secret", "later", "early", "--from-literal", "a=b")
	expectOutput(t, r, 0, []string{"created secret/early"}, []string{`devenvironment "later" does not exist in namespace "` + ns + `" (yet)`})
}

// A context that is not allowed is refused before anything is written.
func TestSecretRefusesContextNotAllowed(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	t.Setenv(AllowedContextsEnv, "kind-*")
	r := plugin(t, "secret", "gpu", "regcred", "--from-literal", "a=b", "-n", ns)
	expectOutput(t, r, 1, nil, []string{"is not allowed"})
	absent(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "regcred"}})
	r = plugin(t, "settings", "gpu", "dev-settings", "--set", "a=b", "-n", ns)
	expectOutput(t, r, 1, nil, []string{"is not allowed"})
	absent(t, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dev-settings"}})
}

// settings writes the ConfigMap a valuesFrom names; the wrong kind and the
// wrong key are warned about; a key this command wrote before and does
// not write now is removed (server-side apply), one written by someone
// else stays.
func TestSettingsCommand(t *testing.T) {
	ns := testenv.Namespace(t, k8s, "cli-")
	createEnv(t, ns, "gpu", referencingSpec())
	ctx := context.Background()

	r := plugin(t, "settings", "gpu", "dev-settings", "--set", "operator.replicas=2", "-n", ns)
	expectOutput(t, r, 0, []string{"created configmap/dev-settings in namespace " + ns + ": keys values.yaml", "sets operator.replicas",
		"used by devenvironment/gpu: spec.components[0].helm.valuesFrom[0]", "asked devenvironment/gpu to reconcile"}, nil)
	cm := &corev1.ConfigMap{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "dev-settings"}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data[settingsKey] != "operator:\n  replicas: 2\n" || cm.Labels[v1alpha1.LabelEnvironment] != "gpu" {
		t.Fatalf("configmap: %+v", cm)
	}

	r = plugin(t, "settings", "gpu", "gpu-secrets", "--set", "a=1", "-n", ns)
	expectOutput(t, r, 0, nil, []string{"Warning: spec.components[0].helm.valuesFrom[1] names Secret gpu-secrets, not a ConfigMap: settings writes a Secret with --secret"})
	r = plugin(t, "settings", "gpu", "gpu-secrets", "--secret", "--set", "a=1", "-n", ns)
	expectOutput(t, r, 0, []string{"created secret/gpu-secrets"}, []string{`reads key "extra.yaml", which secret/gpu-secrets does not have (settings --key extra.yaml writes it)`})

	// Someone else adds a key; the next write with --key extra.yaml drops
	// this command's values.yaml and keeps theirs.
	sec := getSecret(t, ns, "gpu-secrets")
	sec.Data["theirs"] = []byte("x")
	if err := k8s.Update(ctx, sec); err != nil {
		t.Fatal(err)
	}
	r = plugin(t, "settings", "gpu", "gpu-secrets", "--secret", "--key", "extra.yaml", "--set", "a=1", "-n", ns)
	expectOutput(t, r, 0, []string{"configured secret/gpu-secrets", "used by devenvironment/gpu: spec.components[0].helm.valuesFrom[1]"}, nil)
	if r.err != "" {
		t.Fatalf("warnings for a Secret the spec uses as written:\n%s", r)
	}
	sec = getSecret(t, ns, "gpu-secrets")
	if _, ok := sec.Data[settingsKey]; ok || string(sec.Data["extra.yaml"]) != "a: 1\n" || string(sec.Data["theirs"]) != "x" {
		t.Fatalf("secret keys after the second write: %v", sec.Data)
	}
}
