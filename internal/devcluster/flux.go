package devcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
)

// FluxNamespace is where the Flux controllers run, as in a Flux install.
const FluxNamespace = "flux-system"

// fluxFieldOwner is the field manager of everything InstallFlux applies.
const fluxFieldOwner = "devloop-e2e-flux"

// FluxController is one Flux controller as InstallFlux runs it.
type FluxController struct {
	// Name is the controller's (and its Deployment's) name, such as
	// "source-controller".
	Name string
	// Version is the module version built, without "v".
	Version string
	// Image is repository@digest of the image it runs.
	Image string
	// dir holds the binary, crds/ and role.yaml (hack/cluster/flux-binaries.sh).
	dir string
}

// Flux is what InstallFlux installed.
type Flux struct {
	SourceController, KustomizeController FluxController
}

// InstallFlux runs Flux's source-controller and kustomize-controller on the
// cluster, built from their Go modules by hack/cluster/flux-binaries.sh
// (cached under bin/flux; minutes the first time), their images assembled
// with devloop's builder, their CRDs and ClusterRoles taken from the
// modules. Everything is applied server-side and images are reproducible,
// so a second call with nothing changed rolls nothing out. Build output
// goes to log.
func (c *Cluster) InstallFlux(ctx context.Context, log io.Writer) (*Flux, error) {
	dirs, err := c.buildFluxBinaries(ctx, log)
	if err != nil {
		return nil, err
	}
	f := &Flux{
		SourceController:    FluxController{Name: "source-controller", dir: dirs["SOURCE_CONTROLLER"]},
		KustomizeController: FluxController{Name: "kustomize-controller", dir: dirs["KUSTOMIZE_CONTROLLER"]},
	}
	for _, fc := range []*FluxController{&f.SourceController, &f.KustomizeController} {
		if fc.dir == "" {
			return nil, fmt.Errorf("hack/cluster/flux-binaries.sh named no directory for %s", fc.Name)
		}
		fc.Version = strings.TrimPrefix(filepath.Base(fc.dir), fc.Name+"-v")
		if fc.Image, err = pushFluxImage(ctx, *fc); err != nil {
			return nil, err
		}
		if err := c.applyFluxCRDs(ctx, *fc); err != nil {
			return nil, err
		}
	}
	objs, err := fluxObjects(f)
	if err != nil {
		return nil, err
	}
	for _, fc := range []FluxController{f.SourceController, f.KustomizeController} {
		role, err := fluxClusterRole(fc)
		if err != nil {
			return nil, err
		}
		objs = append(objs, role)
	}
	for _, o := range objs {
		if err := c.applyUnstructured(ctx, o); err != nil {
			return nil, err
		}
	}
	for _, fc := range []FluxController{f.SourceController, f.KustomizeController} {
		if err := c.waitRollout(ctx, FluxNamespace, fc.Name, 3*time.Minute); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// buildFluxBinaries runs hack/cluster/flux-binaries.sh and returns its
// NAME=DIR lines.
func (c *Cluster) buildFluxBinaries(ctx context.Context, log io.Writer) (map[string]string, error) {
	script := filepath.Join(c.Root, "hack", "cluster", "flux-binaries.sh")
	cmd := exec.CommandContext(ctx, script)
	cmd.Dir = c.Root
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("building the Flux controllers (%s): %w", script, err)
	}
	dirs := map[string]string{}
	sc := bufio.NewScanner(&out)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			dirs[k] = v
		}
	}
	return dirs, nil
}

// pushFluxImage packs the controller's static binary on scratch, running
// as nobody as Flux's own images do, and pushes it under
// Registry/flux/<name>:v<version>.
func pushFluxImage(ctx context.Context, fc FluxController) (string, error) {
	b, err := image.NewBuilder(image.Registry{Prefix: Registry + "/flux", Insecure: true})
	if err != nil {
		return "", err
	}
	res, err := b.Build(ctx, image.Spec{
		Name:       fc.Name,
		Platforms:  []string{runtime.GOOS + "/" + runtime.GOARCH},
		Layers:     []v1alpha1.LayerMapping{{From: fc.Name, To: "/usr/local/bin/" + fc.Name, Mode: "0755"}},
		Entrypoint: []string{"/usr/local/bin/" + fc.Name},
		User:       "65534:65534",
	}, fc.dir, func(string) ([]string, error) { return []string{"v" + fc.Version}, nil })
	if err != nil {
		return "", fmt.Errorf("the %s image: %w", fc.Name, err)
	}
	return res.Repository + "@" + res.Digest, nil
}

// applyFluxCRDs applies the CRDs the controller's module ships and waits
// until the API server serves them: a controller started before that
// fails its informers' first list.
func (c *Cluster) applyFluxCRDs(ctx context.Context, fc FluxController) error {
	files, err := filepath.Glob(filepath.Join(fc.dir, "crds", "*.yaml"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no CRDs under %s", filepath.Join(fc.dir, "crds"))
	}
	for _, f := range files {
		objs, err := readYAMLObjects(f)
		if err != nil {
			return err
		}
		for _, o := range objs {
			if err := c.applyUnstructured(ctx, o); err != nil {
				return err
			}
			if err := c.waitEstablished(ctx, o.GetName(), time.Minute); err != nil {
				return err
			}
		}
	}
	return nil
}

// fluxClusterRole is the module's config/rbac/role.yaml ("manager-role"),
// named for the controller.
func fluxClusterRole(fc FluxController) (*unstructured.Unstructured, error) {
	objs, err := readYAMLObjects(filepath.Join(fc.dir, "role.yaml"))
	if err != nil {
		return nil, err
	}
	if len(objs) != 1 || objs[0].GetKind() != "ClusterRole" {
		return nil, fmt.Errorf("%s: want one ClusterRole", filepath.Join(fc.dir, "role.yaml"))
	}
	objs[0].SetName("flux-" + fc.Name)
	return objs[0], nil
}

// readYAMLObjects decodes every document of a YAML file.
func readYAMLObjects(path string) ([]*unstructured.Unstructured, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return decodeYAMLObjects(f, path)
}

func decodeYAMLObjects(r io.Reader, what string) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var objs []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if len(u.Object) > 0 {
			objs = append(objs, u)
		}
	}
}

// ApplyYAML applies every object of a multi-document YAML server-side, as
// `kubectl apply --server-side -f` does.
func (c *Cluster) ApplyYAML(ctx context.Context, doc string) error {
	objs, err := decodeYAMLObjects(strings.NewReader(doc), "YAML")
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := c.applyUnstructured(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// applyUnstructured applies o server-side as fluxFieldOwner.
func (c *Cluster) applyUnstructured(ctx context.Context, o *unstructured.Unstructured) error {
	if err := c.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(o), client.FieldOwner(fluxFieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", o.GetKind(), client.ObjectKeyFromObject(o), err)
	}
	return nil
}

// waitEstablished waits for the CRD's Established condition.
func (c *Cluster) waitEstablished(ctx context.Context, name string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		crd := &unstructured.Unstructured{}
		crd.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
		err := c.Client.Get(ctx, client.ObjectKey{Name: name}, crd)
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, cond := range conds {
			if m, ok := cond.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("CRD %s not established after %s", name, timeout)
		case <-time.After(200 * time.Millisecond):
		}
	}
}
