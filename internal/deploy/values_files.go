package deploy

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"sigs.k8s.io/yaml"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/deploy/helm"
	"github.com/devloop-dev/devloop/internal/fault"
	"github.com/devloop-dev/devloop/internal/source"
)

// maxValuesFileSize caps one values file: values are held in memory,
// hashed and stored with every release revision.
const maxValuesFileSize = 4 << 20

// ValuesFiles reads a release's helm.valuesFiles.
type ValuesFiles struct {
	// Field is where the helm section sits in the spec, e.g.
	// spec.components[2].helm; errors name the entry under it.
	Field string
	// Read returns the content of a valuesFiles path; an error that
	// wraps fs.ErrNotExist means there is no such file.
	Read func(path string) ([]byte, error)
}

// valuesFilesOf reads c's values files where the spec says they are: in
// the chart's source, from its root, for a source chart; in the chart
// itself for an oci or repo chart.
func valuesFilesOf(env *v1alpha1.DevEnvironment, c *v1alpha1.Component, art *source.Artifact, ch *helm.Chart) ValuesFiles {
	f := ValuesFiles{Field: componentField(env, c) + ".helm"}
	if art != nil {
		f.Read = SourceFileReader(art.Dir)
	} else {
		f.Read = helm.ChartFileReader(ch, maxValuesFileSize)
	}
	return f
}

// componentField is the spec path of c, e.g. spec.components[2].
func componentField(env *v1alpha1.DevEnvironment, c *v1alpha1.Component) string {
	for i := range env.Spec.Components {
		if env.Spec.Components[i].Name == c.Name {
			return fmt.Sprintf("spec.components[%d]", i)
		}
	}
	return fmt.Sprintf("component %s", c.Name)
}

// SourceFileReader reads files under dir by relative path. It opens them
// through os.Root, so neither '..' nor a symbolic link in the source
// leads outside dir.
func SourceFileReader(dir string) func(string) ([]byte, error) {
	return func(p string) ([]byte, error) {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return nil, err
		}
		defer root.Close()
		f, err := root.Open(p)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return nil, err
		}
		if !fi.Mode().IsRegular() {
			return nil, errors.New("not a regular file")
		}
		return readCapped(f)
	}
}

func readCapped(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, maxValuesFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxValuesFileSize {
		return nil, fmt.Errorf("larger than %d bytes", maxValuesFileSize)
	}
	return b, nil
}

// compose layers the files at paths, in order, into one values map. A
// file that is missing, unreadable or not a YAML map is a permanent error
// naming its valuesFiles entry: the spec or the source must change.
func (f ValuesFiles) compose(paths []string) (map[string]any, error) {
	vals := map[string]any{}
	for j, p := range paths {
		field := fmt.Sprintf("%s.valuesFiles[%d]", f.Field, j)
		if f.Read == nil {
			return nil, fault.Permanentf("%s: %q: no chart files to read it from", field, p)
		}
		data, err := f.Read(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil, fault.Permanentf("%s: %q does not exist", field, p)
		case err != nil:
			return nil, fault.Permanentf("%s: %q cannot be read: %v", field, p, err)
		}
		doc := map[string]any{}
		if err := yaml.Unmarshal(data, &doc); err != nil {
			return nil, fault.Permanentf("%s: %q is not a YAML map: %v", field, p, err)
		}
		vals = MergeValues(vals, doc)
	}
	return vals, nil
}
