package build

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
)

// volcanoTree is a source shaped like Volcano's: three binaries sharing
// pkg/, with tests, docs and vendor beside them.
func volcanoTree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, f := range []string{
		"go.mod",
		"Makefile",
		"README.md",
		"cmd/scheduler/main.go",
		"cmd/controller-manager/main.go",
		"cmd/webhook-manager/main.go",
		"pkg/scheduler/framework/session.go",
		"pkg/scheduler/framework/session_test.go",
		"pkg/scheduler/actions/allocate/allocate.go",
		"pkg/scheduler/actions/allocate/allocate_test.go",
		"pkg/controllers/job/job_controller.go",
		"pkg/webhooks/admission/pods/validate.go",
		"pkg/kube/client.go",
		"docs/design/scheduler.md",
		"vendor/k8s.io/api/core/v1/types.go",
		"vendor/modules.txt",
	} {
		p := filepath.Join(root, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("content of "+f), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("scheduler/main.go", filepath.Join(root, "cmd/link")); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestPathSelection(t *testing.T) {
	root := volcanoTree(t)
	cases := []struct {
		name  string
		paths []string
		want  []string
	}{
		{"a plain directory is a prefix", []string{"cmd/scheduler"}, []string{"cmd/scheduler/main.go"}},
		{"a plain file", []string{"go.mod"}, []string{"go.mod"}},
		{"a trailing slash is the same directory", []string{"cmd/scheduler/"}, []string{"cmd/scheduler/main.go"}},
		{"'*' stays within a segment", []string{"*.md"}, []string{"README.md"}},
		{"'*' as a whole segment selects directories and what is under them", []string{"cmd/*"}, []string{
			"cmd/controller-manager/main.go", "cmd/link", "cmd/scheduler/main.go", "cmd/webhook-manager/main.go"}},
		{"'**' is any number of segments, none included", []string{"**/*.md"}, []string{"README.md", "docs/design/scheduler.md"}},
		{"'?' and classes", []string{"cmd/[sw]?*/main.go"}, []string{"cmd/scheduler/main.go", "cmd/webhook-manager/main.go"}},
		{"an exclude takes out what an earlier entry selected", []string{"pkg/scheduler", "!pkg/**/*_test.go"}, []string{
			"pkg/scheduler/actions/allocate/allocate.go", "pkg/scheduler/framework/session.go"}},
		{"an exclude of a directory", []string{"pkg", "!pkg/scheduler/actions"}, []string{
			"pkg/controllers/job/job_controller.go", "pkg/kube/client.go", "pkg/scheduler/framework/session.go",
			"pkg/scheduler/framework/session_test.go", "pkg/webhooks/admission/pods/validate.go"}},
		{"a later include takes back what an exclude took out", []string{"pkg", "!pkg/scheduler", "pkg/scheduler/framework/session.go"}, []string{
			"pkg/controllers/job/job_controller.go", "pkg/kube/client.go", "pkg/scheduler/framework/session.go",
			"pkg/webhooks/admission/pods/validate.go"}},
		{"the whole source but some", []string{".", "!vendor", "!docs", "!**/*_test.go", "!cmd/*-manager"}, []string{
			"Makefile", "README.md", "cmd/link", "cmd/scheduler/main.go", "go.mod",
			"pkg/controllers/job/job_controller.go", "pkg/kube/client.go",
			"pkg/scheduler/actions/allocate/allocate.go", "pkg/scheduler/framework/session.go",
			"pkg/webhooks/admission/pods/validate.go"}},
		{"an exclude first excludes nothing", []string{"!go.mod", "go.mod"}, []string{"go.mod"}},
		{"an exclude that matches nothing is harmless", []string{"go.mod", "!nothing/here"}, []string{"go.mod"}},
		{"overlapping includes list a file once", []string{"pkg/kube", "pkg/**/client.go", "pkg"}, []string{
			"pkg/controllers/job/job_controller.go", "pkg/kube/client.go",
			"pkg/scheduler/actions/allocate/allocate.go", "pkg/scheduler/actions/allocate/allocate_test.go",
			"pkg/scheduler/framework/session.go", "pkg/scheduler/framework/session_test.go",
			"pkg/webhooks/admission/pods/validate.go"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			sel, err := compilePaths(tc.paths)
			g.Expect(err).NotTo(HaveOccurred())
			files, err := sel.files(root)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(files).To(Equal(tc.want))
		})
	}
}

func TestPathSelectionErrorsNameTheEntry(t *testing.T) {
	root := volcanoTree(t)
	cases := []struct {
		paths []string
		want  string
	}{
		{[]string{"cmd/scheduler", "cmd/agent"}, `paths[1]: path "cmd/agent" is not in the source`},
		{[]string{"pkg/**/*.rs"}, `paths[0]: pattern "pkg/**/*.rs" matches no file in the source`},
		{[]string{"pkg", "!pkg/kube", "pkg/kube/*.c"}, `paths[2]: pattern "pkg/kube/*.c" matches no file in the source`},
		{[]string{"go.mod", "!"}, `paths[1]: empty pattern`},
		{[]string{"pkg/[a-"}, `paths[0]: pattern "pkg/[a-" is malformed`},
		{[]string{"!../etc"}, `paths[0]: path "../etc" leaves the source`},
	}
	for _, tc := range cases {
		t.Run(tc.want, func(t *testing.T) {
			g := NewWithT(t)
			sel, err := compilePaths(tc.paths)
			if err == nil {
				_, err = sel.digest(root)
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.want)))
		})
	}
}

// TestPathDigestChangesOnlyForSelectedFiles: the hash follows the selected
// files' content, names, executable bits and links, and nothing else.
func TestPathDigestChangesOnlyForSelectedFiles(t *testing.T) {
	g := NewWithT(t)
	root := volcanoTree(t)
	sel, err := compilePaths([]string{"cmd/scheduler", "pkg", "!pkg/**/*_test.go", "!pkg/controllers"})
	g.Expect(err).NotTo(HaveOccurred())
	digest := func() string {
		d, err := sel.digest(root)
		g.Expect(err).NotTo(HaveOccurred())
		return d
	}
	write := func(rel, content string) {
		g.Expect(os.WriteFile(filepath.Join(root, rel), []byte(content), 0o644)).To(Succeed())
	}
	first := digest()
	g.Expect(digest()).To(Equal(first), "the same tree hashes alike")

	write("pkg/scheduler/framework/session_test.go", "an edited test")
	write("pkg/controllers/job/job_controller.go", "an edited controller")
	write("cmd/controller-manager/main.go", "another binary")
	write("vendor/modules.txt", "a new dependency")
	g.Expect(os.MkdirAll(filepath.Join(root, "pkg/scheduler/empty"), 0o755)).To(Succeed())
	g.Expect(digest()).To(Equal(first), "changes outside the selection change nothing")

	write("pkg/scheduler/framework/session.go", "an edited scheduler")
	second := digest()
	g.Expect(second).NotTo(Equal(first), "a selected file's content")

	g.Expect(os.Chmod(filepath.Join(root, "pkg/kube/client.go"), 0o755)).To(Succeed())
	third := digest()
	g.Expect(third).NotTo(Equal(second), "a selected file's executable bit")

	write("pkg/kube/new.go", "")
	fourth := digest()
	g.Expect(fourth).NotTo(Equal(third), "a new empty file in the selection")

	g.Expect(os.Rename(filepath.Join(root, "pkg/kube/new.go"), filepath.Join(root, "pkg/kube/renamed.go"))).To(Succeed())
	g.Expect(digest()).NotTo(Equal(fourth), "a renamed file")
}
