// Command imagepack builds the local cluster's base images without a Docker
// engine and pushes them to the cluster's registry:
//
//	pause    one static binary at /pause on scratch, entrypoint [/pause]
//	busybox  a static busybox at /bin/busybox with a symlink per applet
//	         (/bin/sh, /bin/nslookup, ...), cmd [sh]
//
// Images are reproducible: every file has mtime 0 and the config has no
// creation time, so the same inputs give the same digest and a second push
// uploads nothing.
//
// Usage:
//
//	imagepack -registry 10.250.0.1:5000 -insecure \
//	    -pause bin/cluster/tools/pause -pause-ref pause:3.10 \
//	    -busybox /bin/busybox -busybox-ref busybox:1.35
//
// Each pushed reference is printed as REF@DIGEST on stdout.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/devloop-dev/devloop/internal/scratchimage"
)

func main() {
	registry := flag.String("registry", "10.250.0.1:5000", "registry host:port to push to")
	insecure := flag.Bool("insecure", true, "plain HTTP to the registry")
	pauseBin := flag.String("pause", "", "static pause binary (empty: skip the pause image)")
	pauseRef := flag.String("pause-ref", "pause:3.10", "repository:tag of the pause image")
	busyboxBin := flag.String("busybox", "", "static busybox binary (empty: skip the busybox image)")
	busyboxRef := flag.String("busybox-ref", "busybox:1.35", "repository:tag of the busybox image; more tags with commas")
	flag.Parse()

	if err := run(*registry, *insecure, *pauseBin, *pauseRef, *busyboxBin, *busyboxRef); err != nil {
		fmt.Fprintln(os.Stderr, "imagepack:", err)
		os.Exit(1)
	}
}

func run(registry string, insecure bool, pauseBin, pauseRef, busyboxBin, busyboxRefs string) error {
	if pauseBin != "" {
		data, err := os.ReadFile(pauseBin)
		if err != nil {
			return err
		}
		img, err := image([]scratchimage.Entry{{Name: "pause", Mode: 0o755, Data: data}}, v1.Config{Entrypoint: []string{"/pause"}})
		if err != nil {
			return err
		}
		if err := push(img, registry, insecure, pauseRef); err != nil {
			return err
		}
	}
	if busyboxBin != "" {
		entries, err := busybox(busyboxBin)
		if err != nil {
			return err
		}
		img, err := image(entries, v1.Config{
			Cmd: []string{"sh"},
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
		})
		if err != nil {
			return err
		}
		for _, ref := range strings.Split(busyboxRefs, ",") {
			if err := push(img, registry, insecure, ref); err != nil {
				return err
			}
		}
	}
	return nil
}

// busybox lays out /bin/busybox, a symlink per applet it lists, and the few
// files and directories programs expect (/etc/passwd, /tmp, ...).
func busybox(bin string) ([]scratchimage.Entry, error) {
	data, err := os.ReadFile(bin)
	if err != nil {
		return nil, err
	}
	out, err := exec.Command(bin, "--list-full").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list-full: %w", bin, err)
	}
	entries := []scratchimage.Entry{
		{Name: "bin", Dir: true, Mode: 0o755},
		{Name: "sbin", Dir: true, Mode: 0o755},
		{Name: "usr", Dir: true, Mode: 0o755},
		{Name: "usr/bin", Dir: true, Mode: 0o755},
		{Name: "usr/sbin", Dir: true, Mode: 0o755},
		{Name: "etc", Dir: true, Mode: 0o755},
		{Name: "tmp", Dir: true, Mode: 0o1777},
		{Name: "root", Dir: true, Mode: 0o700},
		{Name: "bin/busybox", Mode: 0o755, Data: data},
		{Name: "etc/passwd", Mode: 0o644, Data: []byte("root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n")},
		{Name: "etc/group", Mode: 0o644, Data: []byte("root:x:0:\nnogroup:x:65534:\n")},
	}
	seen := map[string]bool{"bin/busybox": true}
	for _, line := range strings.Split(string(out), "\n") {
		p := strings.TrimSpace(line)
		if p == "" || seen[p] {
			continue
		}
		seen[p] = true
		switch path.Dir(p) {
		case "bin", "sbin", "usr/bin", "usr/sbin":
		default:
			continue
		}
		entries = append(entries, scratchimage.Entry{Name: p, Mode: 0o777, Linkname: "/bin/busybox"})
	}
	return entries, nil
}

// image is scratch plus one layer holding entries (sorted by name), for
// linux/amd64.
func image(entries []scratchimage.Entry, cfg v1.Config) (v1.Image, error) {
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Name < entries[j].Name })
	return scratchimage.Image(entries, v1.History{}, func(cf *v1.ConfigFile) {
		cf.OS, cf.Architecture = "linux", "amd64"
		cf.Config = cfg
	})
}

func push(img v1.Image, registry string, insecure bool, repoTag string) error {
	var opts []name.Option
	if insecure {
		opts = append(opts, name.Insecure)
	}
	ref, err := name.NewTag(registry+"/"+repoTag, opts...)
	if err != nil {
		return err
	}
	if err := remote.Write(ref, img); err != nil {
		return fmt.Errorf("push %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Printf("%s@%s\n", ref, d)
	return nil
}
