package install

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"path"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// argValue is the value of --name=value in args, "" when absent.
func argValue(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// mountedFile is where a container reads key of the Secret secretName, ""
// when it does not mount it.
func mountedFile(d *appsv1.Deployment, c corev1.Container, secretName, key string) string {
	for _, v := range d.Spec.Template.Spec.Volumes {
		if v.Secret == nil || v.Secret.SecretName != secretName {
			continue
		}
		file := key
		if len(v.Secret.Items) > 0 {
			file = ""
			for _, it := range v.Secret.Items {
				if it.Key == key {
					file = it.Path
				}
			}
		}
		for _, m := range c.VolumeMounts {
			if m.Name == v.Name && file != "" {
				return path.Join(m.MountPath, file)
			}
		}
	}
	return ""
}

// Registry tokens and build cache credentials cross the pod network only
// over TLS: the chart makes a CA and a certificate per service for the
// name its clients dial, the manager serves each with its key, and the
// registry front and every instance (shards too, which only tell builder
// pods of the service) trust the CA; no key leaves the main instance.
func TestChartServesTokenAndCacheOverTLS(t *testing.T) {
	objs := renderChart(t, everything())
	secret := find(t, objs, "Secret", "devloop-service-tls")
	data, _, _ := unstructured.NestedStringMap(secret.Object, "data")
	pemOf := func(k string) []byte {
		b, err := base64.StdEncoding.DecodeString(data[k])
		if err != nil || len(b) == 0 {
			t.Fatalf("Secret devloop-service-tls key %s: %v", k, err)
		}
		return b
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemOf("ca.crt")) {
		t.Fatal("ca.crt holds no certificate")
	}
	for _, svc := range []struct{ cert, key, host string }{
		{"token.crt", "token.key", "devloop-registry-token." + namespace + ".svc"},
		{"cache.crt", "cache.key", "devloop-build-cache." + namespace + ".svc"},
	} {
		pair, err := tls.X509KeyPair(pemOf(svc.cert), pemOf(svc.key))
		if err != nil {
			t.Fatalf("%s and %s: %v", svc.cert, svc.key, err)
		}
		block, _ := pem.Decode(pemOf(svc.cert))
		leaf, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: svc.host}); err != nil {
			t.Errorf("%s for %s: %v", svc.cert, svc.host, err)
		}
		if len(pair.Certificate) == 0 {
			t.Errorf("%s: empty chain", svc.cert)
		}
	}

	mainDep := deploymentOf(t, objs, "devloop-manager")
	manager := containerNamed(t, mainDep, "manager")
	for flag, key := range map[string]string{
		"--registry-token-tls-cert": "token.crt", "--registry-token-tls-key": "token.key",
		"--build-cache-tls-cert": "cache.crt", "--build-cache-tls-key": "cache.key", "--build-cache-ca-file": "ca.crt",
	} {
		got := argValue(manager.Args, flag)
		if want := mountedFile(mainDep, manager, "devloop-service-tls", key); got == "" || got != want {
			t.Errorf("manager %s=%q, want the mounted %s (%q)", flag, got, key, want)
		}
	}
	if u := argValue(manager.Args, "--build-cache-url"); !strings.HasPrefix(u, "https://devloop-build-cache."+namespace+".svc:") {
		t.Errorf("--build-cache-url %q: builder pods must dial the certificate's name over https", u)
	}

	reg := deploymentOf(t, objs, "devloop-registry")
	front := containerNamed(t, reg, "front")
	if got, want := argValue(front.Args, "--token-ca-file"), mountedFile(reg, front, "devloop-service-tls", "ca.crt"); got == "" || got != want {
		t.Errorf("front --token-ca-file=%q, want the mounted CA %q", got, want)
	}
	if u := argValue(front.Args, "--token-url"); !strings.HasPrefix(u, "https://devloop-registry-token."+namespace+".svc:") {
		t.Errorf("front --token-url %q: tokens must go to the certificate's name over https", u)
	}

	for _, name := range []string{"devloop-registry", "devloop-manager-team-a", "devloop-manager-team-b"} {
		d := deploymentOf(t, objs, name)
		for _, v := range d.Spec.Template.Spec.Volumes {
			if v.Secret == nil || v.Secret.SecretName != "devloop-service-tls" {
				continue
			}
			if len(v.Secret.Items) != 1 || v.Secret.Items[0].Key != "ca.crt" {
				t.Errorf("%s mounts %v of devloop-service-tls; only the main instance holds the keys", name, v.Secret.Items)
			}
		}
	}
	shard := deploymentOf(t, objs, "devloop-manager-team-a")
	sc := containerNamed(t, shard, "manager")
	if got, want := argValue(sc.Args, "--build-cache-ca-file"), mountedFile(shard, sc, "devloop-service-tls", "ca.crt"); got == "" || got != want {
		t.Errorf("shard --build-cache-ca-file=%q, want the mounted CA %q (its builder pods must trust the service)", got, want)
	}

	// A cluster operator's own Secret (cert-manager): the chart makes none
	// and every mount names theirs.
	vals := everything()
	vals["serviceTLS"] = map[string]any{"secretName": "team-certs"}
	own := renderChart(t, vals)
	for _, o := range own {
		if o.GetName() == "devloop-service-tls" {
			t.Errorf("%s/%s rendered although serviceTLS.secretName names the cluster operator's Secret", o.GetKind(), o.GetName())
		}
	}
	d := deploymentOf(t, own, "devloop-manager")
	if mountedFile(d, containerNamed(t, d, "manager"), "team-certs", "cache.key") == "" {
		t.Errorf("the manager does not mount serviceTLS.secretName")
	}
}
