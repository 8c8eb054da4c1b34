package v1alpha1_test

import (
	"testing"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

func TestSourceSecretName(t *testing.T) {
	spec := builder.Env("", "").In("r:5000").Under("t").HTTPS().RegistryCredentials("regcred").
		Source(builder.GitSource("git", "https://example.com/a.git")).SourceSecret("git", "git-creds").
		Source(
			v1alpha1.Source{Name: "oci", OCI: &v1alpha1.OCISource{Repository: "r:5000/t/src"}},
			v1alpha1.Source{Name: "crds", Output: &v1alpha1.BuildOutputReference{Image: "operator", Name: "crds"}},
		).Spec()
	for name, want := range map[string]string{"git": "git-creds", "oci": "", "crds": "regcred", "missing": ""} {
		if got := spec.SourceSecretName(name); got != want {
			t.Errorf("SourceSecretName(%q) = %q, want %q", name, got, want)
		}
	}
	spec.Registry.CredentialsRef = nil
	if got := spec.SourceSecretName("crds"); got != "" {
		t.Errorf("an output source without registry credentials needs no Secret, got %q", got)
	}
}
