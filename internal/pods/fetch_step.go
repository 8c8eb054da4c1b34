package pods

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/devloop-dev/devloop/internal/source"
)

// FetchStep is `manager helper fetch`, the command line FetchContainer
// gives a builder or test pod's fetch container: it downloads a resolved
// source into the workspace with the operator's own fetch code, and first
// creates the build cache's directories a builder Job names.
func FetchStep(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("helper fetch", flag.ContinueOnError)
	refJSON := fs.String("ref", "", "the resolved source reference, as JSON")
	dest := fs.String("dest", WorkspaceDir, "directory to fill")
	credsDir := fs.String("credentials", "", "directory of a mounted credentials Secret")
	cacheRoot := fs.String("cache-root", "", "mounted build cache volume")
	cacheDirs := fs.String("cache-dirs", "", "comma-separated directories to create in the cache volume")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := MakeCacheDirs(*cacheRoot, *cacheDirs); err != nil {
		return err
	}
	var ref source.Ref
	if err := json.Unmarshal([]byte(*refJSON), &ref); err != nil {
		return fmt.Errorf("--ref: %w", err)
	}
	digest, err := FetchInto(ctx, ref, *credsDir, *dest)
	if err != nil {
		return err
	}
	fmt.Printf("fetched source %s at %s (%s) into %s\n", ref.Source, ref.Revision, digest, *dest)
	return nil
}

// FetchInto downloads ref into dest with the operator's fetch code.
func FetchInto(ctx context.Context, ref source.Ref, credsDir, dest string) (string, error) {
	var creds *source.Credentials
	if credsDir != "" {
		c, err := source.CredentialsFromDir(credsDir)
		if err != nil {
			return "", err
		}
		creds = c
	}
	// The store lives inside the destination's volume, so its content can
	// be moved into place with renames: no copy, symlinks kept as they are.
	store := dest + "/.devloop-store"
	f := &source.Fetcher{Root: store}
	a, err := f.Fetch(ctx, ref, creds)
	if err != nil {
		return "", err
	}
	entries, err := os.ReadDir(a.Dir)
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		if err := os.Rename(a.Dir+"/"+e.Name(), dest+"/"+e.Name()); err != nil {
			return "", fmt.Errorf("moving source %s into %s: %w", ref.Source, dest, err)
		}
	}
	return a.Digest, os.RemoveAll(store)
}

// MakeCacheDirs creates the build cache's subPath directories as this
// (the build's) user, so the build container can write them: the kubelet
// would create them as root.
func MakeCacheDirs(root, dirs string) error {
	if root == "" || dirs == "" {
		return nil
	}
	for _, d := range strings.Split(dirs, ",") {
		if d == "" || strings.ContainsAny(d, "/\\") || d == "." || d == ".." {
			return fmt.Errorf("--cache-dirs: %q is not a plain directory name", d)
		}
		if err := os.MkdirAll(filepath.Join(root, d), 0o775); err != nil {
			return fmt.Errorf("creating build cache directory: %w", err)
		}
	}
	return nil
}
