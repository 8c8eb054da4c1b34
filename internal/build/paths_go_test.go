package build

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// goTree is a Go module shaped like Volcano's: a binary under cmd/, the
// packages it imports spread over pkg/, others it does not, and vendored
// dependencies.
func goTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for name, content := range map[string]string{
		"go.mod":                                          "module volcano.sh/volcano // the module\n\ngo 1.22\n",
		"go.sum":                                          "sums\n",
		"Makefile":                                        "all:\n",
		"cmd/scheduler/main.go":                           "package main\n\nimport (\n\t\"fmt\"\n\t\"k8s.io/klog/v2\"\n\t\"volcano.sh/volcano/pkg/scheduler\"\n)\n",
		"cmd/scheduler/main_test.go":                      "package main\n\nimport _ \"volcano.sh/volcano/pkg/testutil\"\n",
		"cmd/controller/main.go":                          "package main\n\nimport _ \"volcano.sh/volcano/pkg/controllers\"\n",
		"pkg/scheduler/scheduler.go":                      "package scheduler\n\nimport (\n\t\"volcano.sh/volcano/pkg/kube\"\n\t\"volcano.sh/volcano/pkg/scheduler/framework\"\n)\n",
		"pkg/scheduler/scheduler_test.go":                 "package scheduler\n",
		"pkg/scheduler/framework/session.go":              "package framework\n",
		"pkg/scheduler/framework/testdata/x.json":         "{}\n",
		"pkg/kube/client.go":                              "package kube\n\nimport _ \"k8s.io/client-go/kubernetes\"\n",
		"pkg/kube/client_linux.go":                        "//go:build linux\n\npackage kube\n\nimport _ \"volcano.sh/volcano/pkg/linuxonly\"\n",
		"pkg/kube/config.yaml":                            "embedded: true\n",
		"pkg/linuxonly/l.go":                              "package linuxonly\n",
		"pkg/controllers/job.go":                          "package controllers\n",
		"pkg/testutil/util.go":                            "package testutil\n",
		"docs/README.md":                                  "docs\n",
		"vendor/modules.txt":                              "# k8s.io/klog/v2\n",
		"vendor/k8s.io/klog/v2/klog.go":                   "package klog\n\nimport _ \"k8s.io/klog/v2/internal/buffer\"\n",
		"vendor/k8s.io/klog/v2/internal/buffer/buffer.go": "package buffer\n",
		"vendor/k8s.io/client-go/kubernetes/clientset.go": "package kubernetes\n",
		"vendor/k8s.io/api/core/v1/types.go":              "package v1\n",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestGoPackagePaths: "go:cmd/scheduler" selects the files the
// scheduler's build reads — its package and the packages it imports
// transitively in the module and in vendor/, whatever their build tags,
// with files beside them (an embedded config) but not tests,
// subdirectories or packages only tests import — and combines with
// excludes.
func TestGoPackagePaths(t *testing.T) {
	g := NewWithT(t)
	root := goTree(t)
	scheduler := []string{
		"cmd/scheduler/main.go",
		"go.mod", "go.sum",
		"pkg/kube/client.go", "pkg/kube/client_linux.go", "pkg/kube/config.yaml",
		"pkg/linuxonly/l.go",
		"pkg/scheduler/framework/session.go",
		"pkg/scheduler/scheduler.go",
		"vendor/k8s.io/client-go/kubernetes/clientset.go",
		"vendor/k8s.io/klog/v2/internal/buffer/buffer.go",
		"vendor/k8s.io/klog/v2/klog.go",
		"vendor/modules.txt",
	}
	sel, err := compilePaths([]string{"go:cmd/scheduler"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.files(root)).To(Equal(scheduler))

	sel, err = compilePaths([]string{"go:cmd/scheduler/", "!vendor", "Makefile"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sel.files(root)).To(Equal([]string{
		"Makefile", "cmd/scheduler/main.go", "go.mod", "go.sum",
		"pkg/kube/client.go", "pkg/kube/client_linux.go", "pkg/kube/config.yaml",
		"pkg/linuxonly/l.go", "pkg/scheduler/framework/session.go", "pkg/scheduler/scheduler.go",
	}))

	// The hash follows what the scheduler compiles, and only that.
	sel, err = compilePaths([]string{"go:cmd/scheduler"})
	g.Expect(err).NotTo(HaveOccurred())
	first, err := sel.digest(root)
	g.Expect(err).NotTo(HaveOccurred())
	for _, f := range []string{"pkg/controllers/job.go", "pkg/testutil/util.go", "pkg/scheduler/scheduler_test.go", "docs/README.md", "vendor/k8s.io/api/core/v1/types.go"} {
		g.Expect(os.WriteFile(filepath.Join(root, f), []byte("package x // changed\n"), 0o644)).To(Succeed())
	}
	g.Expect(sel.digest(root)).To(Equal(first), "files the scheduler does not compile")
	g.Expect(os.WriteFile(filepath.Join(root, "pkg/linuxonly/l.go"), []byte("package linuxonly // changed\n"), 0o644)).To(Succeed())
	g.Expect(sel.digest(root)).NotTo(Equal(first), "a package it imports on one platform")
}

func TestGoPackagePathsErrorsNameTheEntry(t *testing.T) {
	root := goTree(t)
	for entry, want := range map[string]string{
		"go:cmd/agent":    `paths[1]: go:cmd/agent: "cmd/agent" is not in the source`,
		"go:docs":         `paths[1]: go:docs: "docs" has no Go package`,
		"go:../elsewhere": `paths[1]: path "../elsewhere" leaves the source`,
	} {
		t.Run(entry, func(t *testing.T) {
			g := NewWithT(t)
			sel, err := compilePaths([]string{"Makefile", entry})
			if err == nil {
				_, err = sel.files(root)
			}
			g.Expect(err).To(MatchError(ContainSubstring(want)))
		})
	}
	g := NewWithT(t)
	g.Expect(os.Remove(filepath.Join(root, "go.mod"))).To(Succeed())
	sel, err := compilePaths([]string{"go:cmd/scheduler"})
	g.Expect(err).NotTo(HaveOccurred())
	_, err = sel.files(root)
	g.Expect(err).To(MatchError(ContainSubstring(`paths[0]: go:cmd/scheduler: no go.mod in "cmd/scheduler" or above it in the source`)))
}
