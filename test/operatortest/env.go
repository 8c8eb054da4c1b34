package operatortest

import (
	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// SharedSource is the source SharedOCISource is: a README pushed once
// for every test, for environments whose components the scripted deploy
// engine answers for.
const SharedSource = "src"

// SharedSourceRepository is SharedSource's repository in Registry.
const SharedSourceRepository = "team/src"

// Env starts an environment with an empty spec whose sources and images
// (builder.EnvSpec's AppSource, PushedSource, Registry) live in Registry.
func Env(ns, name string) *builder.EnvSpec {
	return builder.Env(ns, name).In(Registry.Host)
}

// SharedOCISource is the source SharedSource, the same for every test.
func SharedOCISource() v1alpha1.Source {
	return builder.OCISource(SharedSource, Registry.Host+"/"+SharedSourceRepository, "latest")
}

// ScriptedComponent is a component ScriptedDeploy answers for (outside
// the namespaces given to UseDeployEngine), reading SharedSource.
func ScriptedComponent(name string, dependsOn ...string) v1alpha1.Component {
	return builder.Component(name, builder.ManifestsOf(SharedSource), builder.DependsOn(dependsOn...))
}
