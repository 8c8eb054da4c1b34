package v1alpha1

import "testing"

func TestSourceSecretName(t *testing.T) {
	spec := &DevEnvironmentSpec{
		Registry: &RegistrySpec{Prefix: "r:5000/t", CredentialsRef: &LocalObjectReference{Name: "regcred"}},
		Sources: []Source{
			{Name: "git", Git: &GitSource{URL: "https://example.com/a.git", SecretRef: &LocalObjectReference{Name: "git-creds"}}},
			{Name: "oci", OCI: &OCISource{Repository: "r:5000/t/src"}},
			{Name: "crds", Output: &BuildOutputReference{Image: "operator", Name: "crds"}},
		},
	}
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
