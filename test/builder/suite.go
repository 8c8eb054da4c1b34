package builder

import (
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// GoTestSuite runs script (sh -c) on the source "app" in the Go builder
// image with GoEnv and a 1Gi cache volume, which keeps Go's build cache
// (and whatever the tests leave in $HOME/.cache) between runs.
func GoTestSuite(name, builder, script string) v1alpha1.TestSuite {
	size := resource.MustParse("1Gi")
	return v1alpha1.TestSuite{
		Name: name, Source: AppSource, Image: v1alpha1.TestImage{Ref: builder},
		Command: []string{"sh", "-c", script},
		Env:     GoEnv(),
		Cache:   &v1alpha1.TestCache{Size: &size},
	}
}

// BusyboxSuite is a test suite running busybox, echoing its name.
func BusyboxSuite(name string, labels ...string) v1alpha1.TestSuite {
	return v1alpha1.TestSuite{Name: name, Labels: labels, Image: v1alpha1.TestImage{Ref: "busybox:1.36"},
		Command: []string{"sh", "-c", "echo testing " + name}}
}

// HistoryLimit is how many runs of each suite status keeps.
func (b *EnvSpec) HistoryLimit(n int32) *EnvSpec {
	b.env.Spec.HistoryLimit = &n
	return b
}

// Suites adds the test suites built.
func (b *EnvSpec) Suites(s ...*SuiteSpec) *EnvSpec {
	for _, suite := range s {
		b.Tests(suite.Obj())
	}
	return b
}

// SuiteSpec builds a TestSuite: Suite or BuiltSuite, then what the test
// needs, then EnvSpec.Suites (or Obj).
type SuiteSpec struct{ suite v1alpha1.TestSuite }

// Suite starts a suite running busybox, echoing its name
// (BusyboxSuite), triggered by hand.
func Suite(name string, labels ...string) *SuiteSpec {
	return &SuiteSpec{suite: BusyboxSuite(name, labels...)}
}

// BuiltSuite starts a suite running command in the built image, with
// AppSource checked out.
func BuiltSuite(name, image string, command ...string) *SuiteSpec {
	return &SuiteSpec{suite: v1alpha1.TestSuite{Name: name, Source: AppSource, Image: v1alpha1.TestImage{Built: image}, Command: command}}
}

// ImageSuite starts a suite running command in the image ref, with no
// source checked out.
func ImageSuite(name, ref string, command ...string) *SuiteSpec {
	return &SuiteSpec{suite: v1alpha1.TestSuite{Name: name, Image: v1alpha1.TestImage{Ref: ref}, Command: command}}
}

// Obj is the suite built.
func (s *SuiteSpec) Obj() v1alpha1.TestSuite { return s.suite }

// After makes the suite wait for the named components to be Ready and
// suites to pass.
func (s *SuiteSpec) After(dependsOn ...string) *SuiteSpec {
	s.suite.DependsOn = append(s.suite.DependsOn, dependsOn...)
	return s
}

// OnChange runs the suite by itself, once per set of digests it tests.
func (s *SuiteSpec) OnChange() *SuiteSpec {
	s.suite.Trigger = v1alpha1.TriggerOnChange
	return s
}

// Env adds an environment variable of the test container.
func (s *SuiteSpec) Env(name, value string) *SuiteSpec {
	s.suite.Env = append(s.suite.Env, v1alpha1.EnvVar{Name: name, Value: value})
	return s
}

// Params are the variables a trigger may set.
func (s *SuiteSpec) Params(names ...string) *SuiteSpec {
	s.suite.Params = append(s.suite.Params, names...)
	return s
}

// Cache gives the suite a cache claim of the size.
func (s *SuiteSpec) Cache(size string) *SuiteSpec {
	q := resource.MustParse(size)
	s.suite.Cache = &v1alpha1.TestCache{Size: &q}
	return s
}

// Token mounts the ServiceAccount's token in the test pod (asks: true).
func (s *SuiteSpec) Token(asks bool) *SuiteSpec {
	s.suite.ServiceAccountToken = asks
	return s
}

// JUnit reads the suite's results from the JUnit report at path, relative
// to the workspace.
func (s *SuiteSpec) JUnit(path string) *SuiteSpec {
	s.suite.Report = &v1alpha1.TestReport{Path: path, Format: v1alpha1.ReportJUnit}
	return s
}

// Labels labels the suite, for `trigger -l`.
func (s *SuiteSpec) Labels(labels ...string) *SuiteSpec {
	s.suite.Labels = append(s.suite.Labels, labels...)
	return s
}

// Source checks out the source name in the workspace ("": none).
func (s *SuiteSpec) Source(name string) *SuiteSpec {
	s.suite.Source = name
	return s
}
