// Command olm writes devloop's OLM artifacts (make bundle, make catalog,
// make olm-images):
//
//	go run ./hack/olm bundle -version 0.1.0     bundle/ and config/olm/installer-rbac.yaml
//	go run ./hack/olm catalog -opm bin/opm/...  catalog/devloop/catalog.yaml from catalog/semver-template.yaml
//	go run ./hack/olm images -prefix HOST/devloop-dev [-insecure]
//	                                            push the bundle and catalog images
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/devloop-dev/devloop/internal/olm"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: olm bundle|catalog|images [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	version := fs.String("version", "0.1.0", "the operator's semantic version (bundle)")
	image := fs.String("image", "", "manager image (bundle); default "+olm.ManagerImage+":v<version>")
	opm := fs.String("opm", "", "the opm binary (catalog)")
	prefix := fs.String("prefix", "", "registry prefix to push to (images)")
	insecure := fs.Bool("insecure", false, "plain HTTP to the registry (images)")
	_ = fs.Parse(os.Args[2:])
	root, err := os.Getwd()
	if err == nil {
		err = run(context.Background(), os.Args[1], root, *version, *image, *opm, *prefix, *insecure)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "olm:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, cmd, root, version, image, opm, prefix string, insecure bool) error {
	switch cmd {
	case "bundle":
		files, err := olm.Bundle(root, olm.BundleOptions{Version: version, Image: image})
		if err != nil {
			return err
		}
		if err := olm.WriteDir(filepath.Join(root, "bundle"), files); err != nil {
			return err
		}
		rbac, err := olm.InstallerRBAC(root)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(root, "config", "olm", "installer-rbac.yaml"), rbac, 0o644)
	case "catalog":
		if opm == "" {
			return fmt.Errorf("-opm is required (hack/opm.sh builds it)")
		}
		out, err := olm.RenderCatalog(ctx, root, opm)
		if err != nil {
			return err
		}
		return olm.WriteDir(filepath.Join(root, "catalog", olm.Package), map[string][]byte{"catalog.yaml": out})
	case "images":
		if prefix == "" {
			return fmt.Errorf("-prefix is required")
		}
		version, err := olm.BundleVersion(root)
		if err != nil {
			return err
		}
		imgs, err := olm.PushImages(ctx, root, prefix, version, insecure)
		if err != nil {
			return err
		}
		fmt.Println(imgs.Bundle)
		fmt.Println(imgs.Catalog)
		return nil
	}
	return fmt.Errorf("unknown command %q: bundle, catalog or images", cmd)
}
