// Command projectolm publishes another project's operator through OLM v1
// for its development loop (USE-CASES.md #5; docs/real-projects.md,
// stakater/ipshield): from the project's tree (bundle/ as its `make
// bundle` committed it, catalog/package.yaml) it pushes a bundle image
// running the operator image the loop built, renders and validates a
// file-based catalog of it with opm, pushes the catalog image, and prints
// the ClusterCatalog and ClusterExtension that install it.
//
//	go run ./hack/projectolm -tree DIR -prefix 10.250.0.1:5000/ipshield -insecure \
//	    -image 10.250.0.1:5000/ipshield/ghcr.io/stakater/ipshield-operator@sha256:... \
//	    -drop kube-rbac-proxy -opm bin/opm/v1.73.0/opm | kubectl apply -f -
//
// -prefix memory does it all against a registry in this process, to check
// the bundle and the catalog offline. -install-olm first installs OLM v1's
// controllers on the local cluster (hack/cluster), as the OLM end-to-end
// case does (docs/olm-e2e.md).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/devloop-dev/devloop/internal/devcluster"
	"github.com/devloop-dev/devloop/internal/olm"
)

type options struct {
	tree, prefix, image, version, channel, opm, namespace, serviceAccount string
	drop                                                                  []string
	insecure, installOLM                                                  bool
}

func main() {
	var o options
	var drop string
	flag.StringVar(&o.tree, "tree", ".", "the project's tree (bundle/, catalog/package.yaml)")
	flag.StringVar(&o.prefix, "prefix", "", "registry prefix to push to; memory: a registry in this process (offline check)")
	flag.StringVar(&o.image, "image", "", "the operator image the loop built, repository@digest (the CSV's manager container)")
	flag.StringVar(&o.version, "version", "0.0.0-dev", "the development bundle's version")
	flag.StringVar(&o.channel, "channel", "dev", "the catalog channel")
	flag.StringVar(&o.opm, "opm", "bin/opm/v1.73.0/opm", "the opm binary (hack/opm.sh)")
	flag.StringVar(&drop, "drop", "", "comma-separated containers to take out of the CSV (a sidecar nodes cannot pull)")
	flag.StringVar(&o.namespace, "namespace", "", "the ClusterExtension's install namespace (default <package>-system)")
	flag.StringVar(&o.serviceAccount, "service-account", "", "the installer ServiceAccount in it (default <package>-installer)")
	flag.BoolVar(&o.insecure, "insecure", false, "plain HTTP to the registry")
	flag.BoolVar(&o.installOLM, "install-olm", false, "install OLM v1 on the local cluster first (run from devloop's tree)")
	flag.Parse()
	if drop != "" {
		o.drop = strings.Split(drop, ",")
	}
	if err := run(context.Background(), o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "projectolm:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, out io.Writer) error {
	if o.prefix == "" || o.image == "" {
		return fmt.Errorf("-prefix and -image are required")
	}
	if o.installOLM {
		root, err := os.Getwd()
		if err != nil {
			return err
		}
		c, err := devcluster.Connect(ctx, root)
		if err != nil {
			return err
		}
		if _, err := c.InstallOLM(ctx, os.Stderr); err != nil {
			return err
		}
	}
	if o.prefix == "memory" {
		srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
		defer srv.Close()
		o.prefix, o.insecure = strings.TrimPrefix(srv.URL, "http://")+"/project", true
	}
	p, err := olm.PublishProject(ctx, olm.ProjectRelease{Tree: o.tree, Prefix: o.prefix, Image: o.image,
		Version: o.version, Channel: o.channel, Opm: o.opm, Drop: o.drop, Insecure: o.insecure})
	if err != nil {
		return err
	}
	fmt.Fprintln(os.Stderr, "bundle image:", p.Bundle)
	fmt.Fprintln(os.Stderr, "catalog image (opm validate passed):", p.Catalog)
	_, err = io.WriteString(out, p.InstallYAML(o.namespace, o.serviceAccount))
	return err
}
