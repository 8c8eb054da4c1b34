package install

import (
	"encoding/base64"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/internal/registryauth"
)

func containerNamed(t *testing.T, d *appsv1.Deployment, name string) corev1.Container {
	t.Helper()
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("deployment %s has no container %s", d.Name, name)
	return corev1.Container{}
}

// The bundled registry's token authentication is wired end to end: the
// registry trusts the certificate of the key the manager signs with, its
// service and issuer are the manager's defaults, only the front listens
// outside the pod and it sends /token to the manager's token Service.
func TestChartRegistryAuth(t *testing.T) {
	objs := renderChart(t, everything())

	secret := find(t, objs, "Secret", "devloop-registry-token")
	data, _, _ := unstructured.NestedStringMap(secret.Object, "data")
	keyPEM, _ := base64.StdEncoding.DecodeString(data["tls.key"])
	certPEM, _ := base64.StdEncoding.DecodeString(data["tls.crt"])
	if _, err := registryauth.NewSigner(keyPEM, certPEM); err != nil {
		t.Fatalf("the chart's signing key and certificate: %v", err)
	}

	cm := find(t, objs, "ConfigMap", "devloop-registry")
	raw, _, _ := unstructured.NestedString(cm.Object, "data", "config.yml")
	var cfg struct {
		HTTP struct{ Addr string } `json:"http"`
		Auth struct {
			Token struct {
				Service, Issuer, Rootcertbundle string
			} `json:"token"`
		} `json:"auth"`
	}
	if err := yaml.Unmarshal([]byte(raw), &cfg); err != nil {
		t.Fatal(err)
	}
	tok := cfg.Auth.Token
	if tok.Service != registryauth.DefaultService || tok.Issuer != registryauth.DefaultIssuer {
		t.Errorf("registry auth.token service %q issuer %q, want the manager's %q %q", tok.Service, tok.Issuer, registryauth.DefaultService, registryauth.DefaultIssuer)
	}
	if cfg.HTTP.Addr != "127.0.0.1:5001" {
		t.Errorf("registry listens on %q, want the pod's loopback behind the front", cfg.HTTP.Addr)
	}

	reg := deploymentOf(t, objs, "devloop-registry")
	registry := containerNamed(t, reg, "registry")
	if len(registry.Ports) != 0 {
		t.Errorf("the registry container exposes %v; only the front may", registry.Ports)
	}
	mountedCert := false
	for _, m := range registry.VolumeMounts {
		mountedCert = mountedCert || (m.Name == "token-cert" && tok.Rootcertbundle == m.MountPath+"/tls.crt")
	}
	if !mountedCert {
		t.Errorf("rootcertbundle %q is not the mounted token certificate (%v)", tok.Rootcertbundle, registry.VolumeMounts)
	}
	for _, v := range reg.Spec.Template.Spec.Volumes {
		if v.Secret != nil && v.Secret.SecretName == "devloop-registry-token" {
			if len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "tls.crt" {
				t.Errorf("the registry pod mounts %v of the token Secret; the key must stay with the manager", v.Secret.Items)
			}
		}
	}
	front := containerNamed(t, reg, "front")
	if !strings.Contains(strings.Join(front.Args, " "), "--token-url=https://devloop-registry-token."+namespace+".svc:5002/token") {
		t.Errorf("front args %q do not send /token to the manager's token Service", front.Args)
	}
	svc := find(t, objs, "Service", "devloop-registry-token")
	ports, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
	if tp := ports[0].(map[string]any)["targetPort"]; tp != "registry-token" {
		t.Errorf("token Service targets %v", tp)
	}
	manager := containerNamed(t, deploymentOf(t, objs, "devloop-manager"), "manager")
	hasPort := false
	for _, p := range manager.Ports {
		hasPort = hasPort || (p.Name == "registry-token" && p.ContainerPort == 5002)
	}
	if !hasPort {
		t.Errorf("manager ports %v lack registry-token", manager.Ports)
	}

	// registry.auth.enabled=false is the open registry of before.
	vals := everything()
	vals["registry"].(map[string]any)["auth"] = map[string]any{"enabled": false}
	open := renderChart(t, vals)
	for _, o := range open {
		if o.GetName() == "devloop-registry-token" {
			t.Errorf("%s/%s rendered with registry.auth disabled", o.GetKind(), o.GetName())
		}
	}
	if c := deploymentOf(t, open, "devloop-registry").Spec.Template.Spec.Containers; len(c) != 1 || c[0].Ports[0].ContainerPort != 5000 {
		t.Errorf("registry without auth: containers %d, want the registry alone on 5000", len(c))
	}
}
