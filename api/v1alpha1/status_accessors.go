package v1alpha1

import "strings"

// Lookups by name in status and spec, shared by the operator, the kubectl
// plugin and the dev-cluster tooling so each is written once.

// Component is the status entry of a component, or nil.
func (s *DevEnvironmentStatus) Component(name string) *ComponentStatus {
	for i := range s.Components {
		if s.Components[i].Name == name {
			return &s.Components[i]
		}
	}
	return nil
}

// Test is the status entry of a test suite, or nil.
func (s *DevEnvironmentStatus) Test(name string) *TestStatus {
	for i := range s.Tests {
		if s.Tests[i].Name == name {
			return &s.Tests[i]
		}
	}
	return nil
}

// Source is the status entry of a source, or nil.
func (s *DevEnvironmentStatus) Source(name string) *SourceStatus {
	for i := range s.Sources {
		if s.Sources[i].Name == name {
			return &s.Sources[i]
		}
	}
	return nil
}

// Image is the status entry of one of the component's images, or nil.
func (s *ComponentStatus) Image(name string) *ImageStatus {
	if s == nil {
		return nil
	}
	for i := range s.Images {
		if s.Images[i].Name == name {
			return &s.Images[i]
		}
	}
	return nil
}

// Ready reports whether a component is Ready.
func (s *ComponentStatus) Ready() bool { return s != nil && s.Phase == PhaseReady }

// Latest is the suite's newest run, or nil.
func (s *TestStatus) Latest() *TestRun {
	if s == nil || len(s.Runs) == 0 {
		return nil
	}
	return &s.Runs[0]
}

// Passed reports whether the suite's newest run passed.
func (s *TestStatus) Passed() bool {
	r := s.Latest()
	return r != nil && r.Result == ResultPassed
}

// Run is the suite's run numbered n, or nil.
func (s *TestStatus) Run(n int64) *TestRun {
	if s == nil {
		return nil
	}
	for i := range s.Runs {
		if s.Runs[i].Number == n {
			return &s.Runs[i]
		}
	}
	return nil
}

// Component is the spec of a component, or nil.
func (s *DevEnvironmentSpec) Component(name string) *Component {
	for i := range s.Components {
		if s.Components[i].Name == name {
			return &s.Components[i]
		}
	}
	return nil
}

// Source is the spec of a source, or nil.
func (s *DevEnvironmentSpec) Source(name string) *Source {
	for i := range s.Sources {
		if s.Sources[i].Name == name {
			return &s.Sources[i]
		}
	}
	return nil
}

// BuiltImage finds the component that builds the image named image: its
// spec, and the image's status entry (nil when it has none yet). The
// component is nil when no component builds such an image.
func (e *DevEnvironment) BuiltImage(image string) (*Component, *ImageStatus) {
	for i := range e.Spec.Components {
		c := &e.Spec.Components[i]
		for j := range c.Images {
			if c.Images[j].Name == image {
				return c, e.Status.Component(c.Name).Image(image)
			}
		}
	}
	return nil, nil
}

// PullRepository is how nodes name the repository an image was pushed to:
// under registry.pullPrefix when the spec sets one, else as pushed.
func (e *DevEnvironment) PullRepository(image, pushed string) string {
	if r := e.Spec.Registry; r != nil && r.PullPrefix != "" {
		return strings.TrimSuffix(r.PullPrefix, "/") + "/" + image
	}
	return pushed
}

// SecretName is the Secret a source's credentials come from, or "".
func (s *Source) SecretName() string {
	switch {
	case s.Git != nil && s.Git.SecretRef != nil:
		return s.Git.SecretRef.Name
	case s.OCI != nil && s.OCI.SecretRef != nil:
		return s.OCI.SecretRef.Name
	}
	return ""
}

// SourceSecretName is the Secret the pods that fetch source name need:
// the source's own, or for a build output (pushed to the environment's
// registry) registry.credentialsRef. "" when none.
func (s *DevEnvironmentSpec) SourceSecretName(name string) string {
	src := s.Source(name)
	switch {
	case src == nil:
		return ""
	case src.Output != nil:
		if s.Registry != nil && s.Registry.CredentialsRef != nil {
			return s.Registry.CredentialsRef.Name
		}
		return ""
	}
	return src.SecretName()
}

// ServiceAccount is the ServiceAccount the environment acts as: the one
// the spec names, else fallback (the operator's --default-service-account),
// which may be empty.
func (e *DevEnvironment) ServiceAccount(fallback string) string {
	if e.Spec.ServiceAccountName != "" {
		return e.Spec.ServiceAccountName
	}
	return fallback
}

// DefaultPlatform is what an image is built for when it names no
// platforms.
const DefaultPlatform = "linux/amd64"

// BuildPlatforms are the platforms an image is built for.
func (i *ImageSpec) BuildPlatforms() []string {
	if len(i.Platforms) == 0 {
		return []string{DefaultPlatform}
	}
	return i.Platforms
}

// LatestTestResult is "<suite>: <result>" of the run that finished last,
// or "" when none has (the LAST-TEST printer column).
func (s *DevEnvironmentStatus) LatestTestResult() string {
	var latest *TestRun
	var suite string
	for i := range s.Tests {
		for j := range s.Tests[i].Runs {
			run := &s.Tests[i].Runs[j]
			if run.CompletionTime == nil {
				continue
			}
			if latest == nil || run.CompletionTime.After(latest.CompletionTime.Time) {
				latest, suite = run, s.Tests[i].Name
			}
		}
	}
	if latest == nil {
		return ""
	}
	return suite + ": " + string(latest.Result)
}
