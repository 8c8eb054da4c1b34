package plan

import (
	"bytes"
	"fmt"
	"github.com/devloop-dev/devloop/internal/fault"
	"regexp"
	"strings"
	"text/template"
)

// TagValues are the variables a tag template may use.
type TagValues struct {
	// ContentHash is the hex hash of the image's inputs.
	ContentHash string
	// Revision is the source revision: a git commit SHA, or the digest hex of
	// an OCI or Flux artifact.
	Revision string
	// ShortRevision is the first 12 characters of Revision.
	ShortRevision string
	// Source, Image and Component are the names in the spec; '/' in an
	// image name becomes '-' in a tag.
	Source, Image, Component string
}

// validTag is the tag grammar of the OCI distribution spec.
var validTag = regexp.MustCompile(`^[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}$`)

// RenderTag renders one tag template and checks the result is a valid tag.
func RenderTag(tmpl string, v TagValues) (string, error) {
	t, err := template.New("tag").Option("missingkey=error").Parse(tmpl)
	if err != nil {
		return "", fmt.Errorf("tag template %q: %w", tmpl, err)
	}
	v.Image = strings.ReplaceAll(v.Image, "/", "-")
	var buf bytes.Buffer
	if err := t.Execute(&buf, v); err != nil {
		return "", fmt.Errorf("tag template %q: %w", tmpl, err)
	}
	tag := buf.String()
	if !validTag.MatchString(tag) {
		return "", fmt.Errorf("tag template %q renders %q, which is not a valid tag: tags are 1-128 characters of letters, digits, '_', '.' and '-', not starting with '.' or '-'", tmpl, tag)
	}
	return tag, nil
}

// CheckTagTemplate renders tmpl with example values of the longest length
// each variable can have, so a template that passes here renders a valid tag
// for every real build.
func CheckTagTemplate(tmpl string) error {
	_, err := RenderTag(tmpl, TagValues{
		ContentHash:   strings.Repeat("a", 64),
		Revision:      strings.Repeat("b", 64),
		ShortRevision: strings.Repeat("c", 12),
		Source:        strings.Repeat("s", 63),
		Image:         strings.Repeat("i", 63),
		Component:     strings.Repeat("o", 63),
	})
	return err
}

// revisionTemplate matches a tag template made from the source revision.
var revisionTemplate = regexp.MustCompile(`\{\{ ?\.(Revision|ShortRevision) ?\}\}`)

// TagTemplates are an image's tag templates and the values they render
// from, all but the content hash known when the build is planned. Render
// is called once, by the build, when the content hash is known; Revision
// then names the tag made from the source revision, so nothing renders
// the templates again to find it.
type TagTemplates struct {
	Templates []string
	Values    TagValues

	rendered []string
	revision string
}

// NewTagTemplates are the templates of an image named image of component,
// built from a source (named source, "" for none) at revision.
func NewTagTemplates(templates []string, component, image, source, revision string) *TagTemplates {
	v := TagValues{Revision: revision, ShortRevision: ShortRevision(revision), Source: source, Image: image, Component: component}
	return &TagTemplates{Templates: templates, Values: v}
}

// ShortRevision is what {{ .ShortRevision }} renders for revision: its
// first 12 characters.
func ShortRevision(revision string) string {
	if len(revision) > 12 {
		return revision[:12]
	}
	return revision
}

// Render renders every template with contentHash, in order.
func (t *TagTemplates) Render(contentHash string) ([]string, error) {
	v := t.Values
	v.ContentHash = contentHash
	t.rendered, t.revision = nil, ""
	for i, tmpl := range t.Templates {
		tag, err := RenderTag(tmpl, v)
		if err != nil {
			return nil, fault.Permanentf("tags[%d]: %w", i, err)
		}
		if t.revision == "" && t.Values.Source != "" && revisionTemplate.MatchString(tmpl) {
			t.revision = tag
		}
		t.rendered = append(t.rendered, tag)
	}
	return t.rendered, nil
}

// Revision is the tag the last Render made from the source revision (the
// first template using it), or "" when there is none.
func (t *TagTemplates) Revision() string { return t.revision }
