// Command image builds devloop's operator image without Docker (make image):
// the manager compiled for every platform, on a static nonroot base, as one
// multi-platform index pushed to a registry or written to an OCI layout.
//
//	go run ./hack/image -layout bin/image/devloop -tag v0.1.0
//	go run ./hack/image -image 10.250.0.1:5000/devloop/manager:dev -insecure
//
// It prints the reference by digest on stdout.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/devloop-dev/devloop/internal/operatorimage"
)

func main() {
	image := flag.String("image", "", "push to this reference (host/path/name:tag); empty writes an OCI layout")
	insecure := flag.Bool("insecure", false, "plain HTTP to the registry of -image")
	layoutDir := flag.String("layout", "bin/image/devloop", "OCI layout directory, when -image is empty")
	tag := flag.String("tag", "dev", "the layout's ref name (with -image, its tag is used)")
	platforms := flag.String("platforms", strings.Join(operatorimage.DefaultPlatforms, ","), "comma-separated os/arch list")
	caBundle := flag.String("ca-bundle", operatorimage.DefaultCABundle, "PEM CA bundle copied into the image")
	flag.Parse()
	if err := run(*image, *insecure, *layoutDir, *tag, strings.Split(*platforms, ","), *caBundle); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(image string, insecure bool, layoutDir, tag string, platforms []string, caBundle string) error {
	ctx := context.Background()
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	start := time.Now()
	bins, sups, err := operatorimage.Compile(ctx, operatorimage.Compilation{Root: root, OutDir: filepath.Join(root, "bin", "image", "build"), Platforms: platforms})
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "image: compiled the manager for %s in %s\n", strings.Join(platforms, ", "), time.Since(start).Round(time.Millisecond))
	opts := operatorimage.Options{Binaries: bins, Supervisors: sups, CABundle: caBundle, SourceURL: "https://github.com/devloop-dev/devloop", Revision: revision(root)}

	start = time.Now()
	var res *operatorimage.Result
	if image != "" {
		res, err = operatorimage.Push(ctx, opts, image, insecure)
	} else {
		res, err = operatorimage.WriteLayout(ctx, opts, layoutDir, tag)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "image: assembled in %s, tags %s\n", time.Since(start).Round(time.Millisecond), strings.Join(res.Tags, ", "))
	fmt.Println(res.Reference)
	return nil
}

// revision is the commit being built, for the image's revision label.
func revision(root string) string {
	out, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}
