package devcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
)

// OLMNamespace is where OLM v1's controllers run, as in its own install.
const OLMNamespace = "olmv1-system"

// olmFieldOwner is the field manager of everything the OLM install and the
// OLM end-to-end objects are applied as.
const olmFieldOwner = "devloop-e2e-olm"

// The Deployments of OLM v1's config/ (names after its kustomize prefixes).
const (
	catalogdDeployment           = "catalogd-controller-manager"
	operatorControllerDeployment = "operator-controller-controller-manager"
)

// olmRegistriesConf is the ConfigMap mounted at /etc/containers in both
// controllers: containers/image, which they pull catalog and bundle images
// with, then reaches the cluster's registry over plain HTTP. No
// policy.json: both fall back to accepting unsigned images.
const olmRegistriesConf = "olm-registries-conf"

// OLM is what InstallOLM installed.
type OLM struct {
	// Version is the operator-controller module version built (catalogd is
	// built from the same module), without "v", and "-patched" when
	// hack/cluster/olm-binaries.sh applied a backported fix.
	Version string
	// OperatorControllerImage and CatalogdImage are repository@digest.
	OperatorControllerImage, CatalogdImage string
	// dir holds the binaries and the module's config/
	// (hack/cluster/olm-binaries.sh).
	dir string
}

// InstallOLM runs OLM v1 (operator-controller and catalogd) on the
// cluster: built from the Go module by hack/cluster/olm-binaries.sh (cached
// under bin/olm; minutes the first time; v1.2.0 with one upstream fix
// backported, see the script), images assembled with devloop's
// builder, installed from the module's own config/overlays/cert-manager
// without cert-manager: the certificates it would issue (a CA, catalogd's
// serving certificate, operator-controller's) are made here into the
// Secrets the overlay mounts, and the CA goes into catalogd's webhook.
// Everything is applied server-side, images are reproducible and existing
// certificates are kept, so a second call with nothing changed rolls
// nothing out. Build output goes to log.
func (c *Cluster) InstallOLM(ctx context.Context, log io.Writer) (*OLM, error) {
	dir, err := c.buildOLMBinaries(ctx, log)
	if err != nil {
		return nil, err
	}
	o := &OLM{dir: dir, Version: strings.TrimPrefix(filepath.Base(dir), "operator-controller-v")}
	if o.OperatorControllerImage, err = pushOLMImage(ctx, dir, "operator-controller", o.Version); err != nil {
		return nil, err
	}
	if o.CatalogdImage, err = pushOLMImage(ctx, dir, "catalogd", o.Version); err != nil {
		return nil, err
	}
	objs, err := olmObjects(dir)
	if err != nil {
		return nil, err
	}
	// The namespace and the CRDs first: the Secrets go into the one, the
	// controllers list the others when they start.
	var rest []*unstructured.Unstructured
	for _, u := range objs {
		switch u.GetKind() {
		case "Namespace":
			if err := c.applyOLM(ctx, u); err != nil {
				return nil, err
			}
		case "CustomResourceDefinition":
			if err := c.applyOLM(ctx, u); err != nil {
				return nil, err
			}
			if err := c.waitEstablished(ctx, u.GetName(), time.Minute); err != nil {
				return nil, err
			}
		default:
			rest = append(rest, u)
		}
	}
	ca, err := c.ensureOLMCertificates(ctx)
	if err != nil {
		return nil, err
	}
	if err := finishOLMObjects(rest, o, ca); err != nil {
		return nil, err
	}
	rest = append(rest, olmRegistriesConfigMap())
	for _, u := range rest {
		if err := c.applyOLM(ctx, u); err != nil {
			return nil, err
		}
	}
	for _, name := range []string{catalogdDeployment, operatorControllerDeployment} {
		if err := c.waitRollout(ctx, OLMNamespace, name, 3*time.Minute); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// buildOLMBinaries runs hack/cluster/olm-binaries.sh and returns the
// directory of its OLM= line.
func (c *Cluster) buildOLMBinaries(ctx context.Context, log io.Writer) (string, error) {
	script := filepath.Join(c.Root, "hack", "cluster", "olm-binaries.sh")
	cmd := exec.CommandContext(ctx, script)
	cmd.Dir = c.Root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("building OLM v1's controllers (%s): %w", script, err)
	}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "OLM="); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("%s named no directory (want an OLM= line)", script)
}

// pushOLMImage packs one static binary at /<name> on scratch, running as
// 65532 as upstream's distroless images do (their commands are ./catalogd
// and /operator-controller, from /), and pushes it under
// Registry/olm/<name>:v<version>.
func pushOLMImage(ctx context.Context, dir, name, version string) (string, error) {
	b, err := image.NewBuilder(image.Registry{Prefix: Registry + "/olm", Insecure: true})
	if err != nil {
		return "", err
	}
	res, err := b.Build(ctx, image.Spec{
		Name:       name,
		Platforms:  []string{runtime.GOOS + "/" + runtime.GOARCH},
		Layers:     []v1alpha1.LayerMapping{{From: name, To: "/" + name, Mode: "0755"}},
		Entrypoint: []string{"/" + name},
		WorkingDir: "/",
		User:       "65532:65532",
	}, dir, func(string) ([]string, error) { return []string{"v" + version}, nil })
	if err != nil {
		return "", fmt.Errorf("the %s image: %w", name, err)
	}
	return res.Repository + "@" + res.Digest, nil
}

// olmObjects is `kustomize build config/overlays/cert-manager` of the
// module, without cert-manager's own objects (Issuers, Certificates): the
// Secrets those would fill are made by ensureOLMCertificates.
func olmObjects(dir string) ([]*unstructured.Unstructured, error) {
	overlay := filepath.Join(dir, "config", "overlays", "cert-manager")
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), overlay)
	if err != nil {
		return nil, fmt.Errorf("kustomize build %s: %w", overlay, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range res.Resources() {
		// Through JSON: kustomize's maps hold ints, which unstructured's
		// deep copies refuse (they want int64).
		data, err := r.MarshalJSON()
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			return nil, err
		}
		if strings.HasPrefix(u.GetAPIVersion(), "cert-manager.io/") {
			continue
		}
		out = append(out, u)
	}
	return out, nil
}

// finishOLMObjects points the Deployments at the images built here, mounts
// the registries.conf and a writable /tmp (image unpacking uses it; the
// images have no file system of their own) into both, and gives catalogd's
// webhook the CA cert-manager would have injected.
func finishOLMObjects(objs []*unstructured.Unstructured, o *OLM, ca []byte) error {
	seen := map[string]bool{}
	for _, u := range objs {
		switch {
		case u.GetKind() == "Deployment" && (u.GetName() == catalogdDeployment || u.GetName() == operatorControllerDeployment):
			image := o.CatalogdImage
			if u.GetName() == operatorControllerDeployment {
				image = o.OperatorControllerImage
			}
			if err := patchOLMDeployment(u, image); err != nil {
				return err
			}
			seen[u.GetName()] = true
		case u.GetKind() == "MutatingWebhookConfiguration":
			annotations := u.GetAnnotations()
			delete(annotations, "cert-manager.io/inject-ca-from-secret")
			u.SetAnnotations(annotations)
			hooks, _, _ := unstructured.NestedSlice(u.Object, "webhooks")
			for _, h := range hooks {
				if err := unstructured.SetNestedField(h.(map[string]any), base64.StdEncoding.EncodeToString(ca), "clientConfig", "caBundle"); err != nil {
					return err
				}
			}
			if err := unstructured.SetNestedSlice(u.Object, hooks, "webhooks"); err != nil {
				return err
			}
			seen[u.GetKind()] = true
		}
	}
	for _, want := range []string{catalogdDeployment, operatorControllerDeployment, "MutatingWebhookConfiguration"} {
		if !seen[want] {
			return fmt.Errorf("OLM's config/overlays/cert-manager has no %s: a layout this install does not know", want)
		}
	}
	return nil
}

func patchOLMDeployment(u *unstructured.Unstructured, image string) error {
	spec, _, _ := unstructured.NestedMap(u.Object, "spec", "template", "spec")
	containers, _, _ := unstructured.NestedSlice(spec, "containers")
	found := false
	for _, c := range containers {
		cm := c.(map[string]any)
		if cm["name"] != "manager" {
			continue
		}
		found = true
		cm["image"] = image
		mounts, _, _ := unstructured.NestedSlice(cm, "volumeMounts")
		cm["volumeMounts"] = append(mounts,
			map[string]any{"name": olmRegistriesConf, "mountPath": "/etc/containers", "readOnly": true},
			map[string]any{"name": "tmp", "mountPath": "/tmp"})
	}
	if !found {
		return fmt.Errorf("deployment %s has no container named manager", u.GetName())
	}
	volumes, _, _ := unstructured.NestedSlice(spec, "volumes")
	spec["volumes"] = append(volumes,
		map[string]any{"name": olmRegistriesConf, "configMap": map[string]any{"name": olmRegistriesConf}},
		map[string]any{"name": "tmp", "emptyDir": map[string]any{}})
	spec["containers"] = containers
	return unstructured.SetNestedMap(u.Object, spec, "spec", "template", "spec")
}

func olmRegistriesConfigMap() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("v1")
	u.SetKind("ConfigMap")
	u.SetNamespace(OLMNamespace)
	u.SetName(olmRegistriesConf)
	_ = unstructured.SetNestedStringMap(u.Object, map[string]string{
		"registries.conf": "[[registry]]\nlocation = \"" + Registry + "\"\ninsecure = true\n",
	}, "data")
	return u
}

// applyOLM applies o server-side as olmFieldOwner.
func (c *Cluster) applyOLM(ctx context.Context, o *unstructured.Unstructured) error {
	if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(olmFieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", o.GetKind(), client.ObjectKeyFromObject(o), err)
	}
	return nil
}

// ApplyOLMYAML applies every object of a multi-document YAML server-side
// as the OLM end-to-end objects' field manager.
func (c *Cluster) ApplyOLMYAML(ctx context.Context, doc string) error {
	objs, err := decodeYAMLObjects(strings.NewReader(doc), "YAML")
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.applyOLM(ctx, o); err != nil {
			return err
		}
	}
	return nil
}
