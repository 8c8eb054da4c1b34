package devcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/image"
	"github.com/devloop-dev/devloop/internal/operatorimage"
)

// Images the cluster runs devloop with.
const (
	// OperatorRepository holds the operator image; builder and test pods
	// pull it too, for their helper containers.
	OperatorRepository = Registry + "/devloop/manager"
	// GoImage is a Go toolchain image for builder Jobs and test suites,
	// the one config/samples/dev names.
	GoImage = Registry + "/devloop/golang:dev"
	// busybox is pushed by hack/cluster.
	busybox = Registry + "/busybox:1.35"
)

// PushOperator compiles the manager for this machine's platform (the
// node's) only, with LocalBuildFlags (the packages `go test` compiled are
// reused), and pushes the operator image, ko-style, with internal/image.
// progress, when set, receives a line per compiled package. It returns
// repository@digest.
func (c *Cluster) PushOperator(ctx context.Context, progress io.Writer) (string, error) {
	platform := runtime.GOOS + "/" + runtime.GOARCH
	out, err := os.MkdirTemp("", "devloop-manager-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(out)
	bins, sups, err := operatorimage.Compile(ctx, operatorimage.Compilation{Root: c.Root, OutDir: out, Platforms: []string{platform}, Flags: operatorimage.LocalBuildFlags, Progress: progress})
	if err != nil {
		return "", err
	}
	res, err := operatorimage.Push(ctx, operatorimage.Options{Binaries: bins, Supervisors: sups}, OperatorRepository+":dev", true)
	if err != nil {
		return "", err
	}
	return res.Reference, nil
}

// PushGoImage assembles a Go image from this machine's GOROOT on busybox
// (a shell for build commands), with make and git (builderTools), and
// pushes it as GoImage. The toolchain is the one this repository builds
// with, so sample builds behave as here.
func (c *Cluster) PushGoImage(ctx context.Context) (string, error) {
	goroot := runtime.GOROOT()
	if goroot == "" {
		goroot = "/usr/local/go"
	}
	goroot, err := filepath.Abs(goroot)
	if err != nil {
		return "", err
	}
	b, err := image.NewBuilder(image.Registry{Prefix: Registry + "/devloop", Insecure: true})
	if err != nil {
		return "", err
	}
	// Layers are taken from this machine's root: the toolchain, then the
	// tools with their libraries.
	var layers []v1alpha1.LayerMapping
	for _, p := range []string{"bin", "pkg", "src", "go.env", "VERSION"} {
		if _, err := os.Stat(filepath.Join(goroot, p)); err != nil {
			continue
		}
		layers = append(layers, v1alpha1.LayerMapping{From: strings.TrimPrefix(goroot, "/") + "/" + p, To: "/usr/local/go/" + p})
	}
	tools, err := toolLayers(ctx, builderTools)
	if err != nil {
		return "", fmt.Errorf("the Go image: %w", err)
	}
	layers = append(layers, tools...)
	tag := GoImage[strings.LastIndex(GoImage, ":")+1:]
	res, err := b.Build(ctx, image.Spec{Name: "golang", Base: busybox, Layers: layers,
		Env: []v1alpha1.EnvVar{{Name: "PATH", Value: "/usr/local/go/bin:/usr/bin:/bin"}, {Name: "GOTOOLCHAIN", Value: "local"}}},
		"/", func(string) ([]string, error) { return []string{tag}, nil })
	if err != nil {
		return "", fmt.Errorf("the Go image: %w", err)
	}
	return res.Repository + "@" + res.Digest, nil
}
