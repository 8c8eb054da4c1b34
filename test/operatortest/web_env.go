package operatortest

import (
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
)

// AppFiles pushes files to the namespace's "src" repository at tag "dev",
// read by environments with the source AppSource, and returns its digest.
func AppFiles(t testing.TB, ns string, files map[string]string) v1.Hash {
	t.Helper()
	return Registry.PushSource(t, ns+"/src", "dev", files)
}

// WebEnv is the environment most build, deploy and live update tests
// start from: one in-process image "web" built from AppSource (a binary
// and a static directory, two layers, a content tag and a revision tag),
// in component "web", which applies the whole source as manifests.
func WebEnv(ns string) *v1alpha1.DevEnvironment {
	web := builder.Component("web", builder.Manifests())
	web.Images = []v1alpha1.ImageSpec{{
		Name: "web", Source: builder.AppSource,
		Layers: []v1alpha1.LayerMapping{
			{From: "bin/web", To: "/web", Mode: "0755"},
			{From: "static", To: "/srv/static"},
		},
		Entrypoint: []string{"/web"},
		Tags:       []string{"{{ .ContentHash }}", "rev-{{ .ShortRevision }}"},
	}}
	return Env(ns, "web").Registry().AppSource().Components(web).Obj()
}

// WebFiles are WebEnv's source with the binary's content.
func WebFiles(binary string) map[string]string {
	return map[string]string{"bin/web": binary, "static/index.html": "<h1>hello</h1>"}
}

// WebDeployment is a manifest of a Deployment running the built image by
// its bare name.
const WebDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: web:latest
`
