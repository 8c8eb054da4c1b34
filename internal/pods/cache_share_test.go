package pods

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// shareEnv is an environment "vc" with images of source src built in
// golang:1.25 with caches (two of them sized), one built elsewhere, and
// one without a cache.
func shareEnv() *v1alpha1.DevEnvironment {
	run := func(builder, size string) *v1alpha1.BuildRun {
		r := &v1alpha1.BuildRun{Image: builder, Command: []string{"make"}, Cache: &v1alpha1.BuildCache{}}
		if size != "" {
			q := resource.MustParse(size)
			r.Cache.Size = &q
		}
		return r
	}
	env := &v1alpha1.DevEnvironment{}
	env.Name = "vc"
	env.Spec.Components = []v1alpha1.Component{
		{Name: "a", Images: []v1alpha1.ImageSpec{
			{Name: "scheduler", Source: "src", Run: run("golang:1.25", "1Gi")},
			{Name: "controller", Source: "src", Run: run("golang:1.25", "3Gi")},
		}},
		{Name: "b", Images: []v1alpha1.ImageSpec{
			{Name: "webhook", Source: "src", Run: run("golang:1.25", "")},
			{Name: "tool", Source: "src", Run: run("golang:1.26", "")},
			{Name: "nocache", Source: "src", Run: &v1alpha1.BuildRun{Image: "golang:1.25"}},
			{Name: "other-tree", Source: "docs", Run: run("golang:1.25", "")},
		}},
	}
	return env
}

func image(env *v1alpha1.DevEnvironment, name string) *v1alpha1.ImageSpec {
	for _, c := range env.Spec.Components {
		for i := range c.Images {
			if c.Images[i].Name == name {
				return &c.Images[i]
			}
		}
	}
	return nil
}

// TestImagesOfOneTreeAndBuilderShareOneClaim: the claim is one per
// (source, builder image, cache paths) across components, sized by its
// largest ask; another builder image, another source or other paths make
// another claim; an image without a cache has none.
func TestImagesOfOneTreeAndBuilderShareOneClaim(t *testing.T) {
	env := shareEnv()
	sched, ok := ImageCacheShare(env, image(env, "scheduler"))
	if !ok {
		t.Fatal("an image with a run cache has a share")
	}
	for _, name := range []string{"controller", "webhook"} {
		if s, _ := ImageCacheShare(env, image(env, name)); s.Claim != sched.Claim {
			t.Errorf("%s mounts %s, scheduler %s: want one claim", name, s.Claim, sched.Claim)
		}
	}
	if want := []string{"scheduler", "controller", "webhook"}; len(sched.Images) != 3 || sched.Images[0] != want[0] || sched.Images[2] != want[2] {
		t.Errorf("sharing images %v, want %v", sched.Images, want)
	}
	if sched.Size == nil || sched.Size.String() != "3Gi" {
		t.Errorf("size %v, want the largest ask 3Gi", sched.Size)
	}
	for _, name := range []string{"tool", "other-tree"} {
		if s, _ := ImageCacheShare(env, image(env, name)); s.Claim == sched.Claim {
			t.Errorf("%s shares the scheduler's claim %s", name, s.Claim)
		}
	}
	image(env, "webhook").Run.Cache.Paths = []string{"/root/.cache"}
	if s, _ := ImageCacheShare(env, image(env, "webhook")); s.Claim == sched.Claim {
		t.Errorf("other cache paths share claim %s", s.Claim)
	}
	if _, ok := ImageCacheShare(env, image(env, "nocache")); ok {
		t.Error("an image without run.cache has a share")
	}
	if errs := validation.IsDNS1123Label(sched.Claim); len(errs) > 0 {
		t.Errorf("claim name %q: %v", sched.Claim, errs)
	}
}

// TestSuiteJoinsTheShareOfItsSourceAndImage: a suite with a cache, run in
// the images' builder image on their source, mounts their claim at their
// paths; in another image, or without a cache, it does not.
func TestSuiteJoinsTheShareOfItsSourceAndImage(t *testing.T) {
	env := shareEnv()
	sched, _ := ImageCacheShare(env, image(env, "scheduler"))
	big := resource.MustParse("8Gi")
	suite := &v1alpha1.TestSuite{Name: "unit", Source: "src", Image: v1alpha1.TestImage{Ref: "golang:1.25"}, Cache: &v1alpha1.TestCache{Size: &big}}
	share, ok := SuiteCacheShare(env, suite)
	if !ok || share.Claim != sched.Claim || len(share.Paths) != 2 || share.Paths[1] != "/go/pkg/mod" {
		t.Fatalf("suite share %+v (ok %v), want claim %s at the builders' paths", share, ok, sched.Claim)
	}
	if share.Size.String() != "8Gi" {
		t.Errorf("size %s, want the suite's larger ask", share.Size)
	}
	suite.Image.Ref = "golang:1.24"
	if _, ok := SuiteCacheShare(env, suite); ok {
		t.Error("a suite in another image joins the share")
	}
	suite.Image.Ref, suite.Cache = "golang:1.25", nil
	if _, ok := SuiteCacheShare(env, suite); ok {
		t.Error("a suite without a cache joins the share")
	}
}
