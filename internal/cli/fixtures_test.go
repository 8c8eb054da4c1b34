package cli

import (
	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// The plugin's fixtures name one registry, over HTTPS as a developer's
// is, and one path in it whatever namespace a test runs in: the golden
// output spells registry.test/team.
const (
	fixtureRegistry = "registry.test"
	fixturePath     = "team"
)

// fixtureEnv starts a fixture environment: its images pushed to and its
// source app fetched from registry.test/team, over HTTPS.
func fixtureEnv(ns, name string) *builder.EnvSpec {
	return builder.Env(ns, name).In(fixtureRegistry).Under(fixturePath).HTTPS()
}

// teamEnv is an environment of two components and three suites: crds,
// then web (an image and manifests from the oci source app); unit after
// web, e2e and smoke labelled e2e.
func teamEnv(ns, name string) *builder.EnvSpec {
	return fixtureEnv(ns, name).Registry().AppSource().
		Source(builder.GitSource("upstream", "https://git.test/team/upstream.git")).
		Components(
			builder.Component("crds", builder.ManifestsOf("upstream", "config/crd")),
			builder.Component("web", builder.DependsOn("crds"),
				builder.Images(builder.Image("web", builder.Layer("bin/web", "/web"))),
				builder.Manifests("deploy")),
		).
		Suites(
			builder.ImageSuite("unit", "golang:1.25", "make", "test").After("web"),
			builder.BuiltSuite("e2e", "web", "/e2e").Source("").Labels("e2e").After("web"),
			builder.BuiltSuite("smoke", "web", "/smoke").Source("").Labels("e2e"),
		)
}

// teamSpec is teamEnv's spec, for the tests that create it under names of
// their own (createEnv) or edit it first.
func teamSpec() v1alpha1.DevEnvironmentSpec { return teamEnv("", "").Spec() }
