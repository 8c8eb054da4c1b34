package plan

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// checkImages parses every image reference with go-containerregistry, the
// library that will pull and push them, and renders every tag template.
func checkImages(spec *v1alpha1.DevEnvironmentSpec, root *field.Path) field.ErrorList {
	var errs field.ErrorList
	if spec.Registry != nil {
		rp := root.Child("registry")
		if err := checkPrefix(spec.Registry.Prefix); err != nil {
			errs = append(errs, field.Invalid(rp.Child("prefix"), spec.Registry.Prefix, err.Error()))
		}
		if p := spec.Registry.PullPrefix; p != "" {
			if err := checkPrefix(p); err != nil {
				errs = append(errs, field.Invalid(rp.Child("pullPrefix"), p, err.Error()))
			}
		}
	}
	for i, c := range spec.Components {
		for j, img := range c.Images {
			ip := root.Child("components").Index(i).Child("images").Index(j)
			if img.Base != "" {
				if _, err := name.ParseReference(img.Base); err != nil {
					errs = append(errs, field.Invalid(ip.Child("base"), img.Base, err.Error()))
				}
			}
			if img.Run != nil {
				if _, err := name.ParseReference(img.Run.Image); err != nil {
					errs = append(errs, field.Invalid(ip.Child("run", "image"), img.Run.Image, err.Error()))
				}
			}
			for k, tmpl := range img.Tags {
				if err := CheckTagTemplate(tmpl); err != nil {
					errs = append(errs, field.Invalid(ip.Child("tags").Index(k), tmpl, err.Error()))
				}
			}
		}
	}
	for i, t := range spec.Tests {
		if t.Image.Ref != "" {
			if _, err := name.ParseReference(t.Image.Ref); err != nil {
				errs = append(errs, field.Invalid(root.Child("tests").Index(i).Child("image", "ref"), t.Image.Ref, err.Error()))
			}
		}
	}
	return errs
}

// checkPrefix accepts host[:port][/path] as go-containerregistry parses
// repositories; a scheme is refused because plain HTTP is said with
// registry.insecure, never with the address.
func checkPrefix(prefix string) error {
	if strings.Contains(prefix, "://") {
		return errors.New("a registry prefix has no scheme: write host[:port]/path and set insecure for plain HTTP")
	}
	_, err := name.NewRepository(prefix+"/probe", name.StrictValidation)
	return err
}

// checkHelm validates release names as Helm itself will.
func checkHelm(spec *v1alpha1.DevEnvironmentSpec, root *field.Path) field.ErrorList {
	var errs field.ErrorList
	for i, c := range spec.Components {
		release, ok := c.ReleaseName()
		if !ok {
			continue
		}
		if err := checkReleaseName(release); err != nil {
			errs = append(errs, field.Invalid(root.Child("components").Index(i).Child("helm", "releaseName"), release, err.Error()))
		}
	}
	return errs
}

// releaseName is Helm's rule for release names (a DNS-1123 subdomain of
// at most maxReleaseName characters). It is written here rather than
// called from Helm's chartutil so that what only plans (the kubectl
// plugin) does not link the Helm SDK; a test holds it to Helm's.
var releaseName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)

const maxReleaseName = 53

// checkReleaseName accepts what Helm accepts as a release name.
func checkReleaseName(name string) error {
	if len(name) > maxReleaseName || !releaseName.MatchString(name) {
		return fmt.Errorf("invalid release name: it must be at most %d characters of lower-case letters, digits, '-' and '.', starting and ending with a letter or digit", maxReleaseName)
	}
	return nil
}
