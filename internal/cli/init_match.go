package cli

import (
	"path"
	"strings"
)

// binding ties a Go main to the place a chart or a kustomization names
// its image: that is how init knows which binaries are images, and where
// their references go.
type binding struct {
	Chart *helmChart
	Image chartImage
	Kust  *kustomization
	// TiltRef is the image a Tiltfile's docker_build names for the main.
	TiltRef string
	// Why is the reason of the match, for the output's comments.
	Why string
}

// normal compares names written with '_' or '-' and in any case alike.
func normal(s string) string { return strings.ToLower(strings.ReplaceAll(s, "_", "-")) }

// matchChartImage finds the main a chart's image reference is built from:
// the image's name is the binary's (gpu-operator), the values key is
// (validator), or the name ends in -<binary> (vc-controller-manager, the
// longest such binary winning over controller-manager's shorter
// neighbours). Ambiguous matches are no match.
func matchChartImage(img chartImage, mains []goMain) (int, string) {
	name, key := normal(img.shortName()), normal(img.Key)
	best, why, bestLen, tie := -1, "", 0, false
	for i, m := range mains {
		b := normal(m.Name)
		switch {
		case name == b:
			return i, "the chart's image name " + img.Name + " is binary " + m.Name + "'s"
		case key == b:
			if bestLen < 1000 {
				best, why, bestLen, tie = i, "the values key "+img.Path+" names binary "+m.Name, 1000, false
			}
		case strings.HasSuffix(b, "-"+key) && bestLen < 1:
			// The key names the binary's last word (operatorImage for
			// registration-operator): the weakest match.
			best, why, bestLen = i, "the values key "+img.Path+" names the last word of binary "+m.Name, 0
		case strings.HasSuffix(name, "-"+b) && len(b) >= bestLen:
			if len(b) == bestLen {
				tie = true
				continue
			}
			best, why, bestLen, tie = i, "the chart's image name "+img.Name+" ends in binary "+m.Name+"'s name", len(b), false
		}
	}
	if tie {
		return -1, ""
	}
	return best, why
}

// bindMains finds, for every main, the chart values and kustomizations
// that name its image. Chart references with the same image name as a
// bound one go to the same main (GPU Operator's nodeStatusExporter runs
// the validator's image). With one main and one image reference in all
// charts, they are taken to be the same.
func bindMains(s *treeScan) map[int][]binding {
	out := map[int][]binding{}
	boundNames := map[string]int{}
	var unbound []binding
	refs := 0
	for _, c := range s.Charts {
		for _, img := range c.Images {
			refs++
			if i, why := matchChartImage(img, s.Mains); i >= 0 {
				out[i] = append(out[i], binding{Chart: c, Image: img, Why: why})
				if img.Name != "" {
					boundNames[img.Name] = i
				}
			} else {
				unbound = append(unbound, binding{Chart: c, Image: img})
			}
		}
	}
	for _, b := range unbound {
		if i, ok := boundNames[b.Image.Name]; ok && b.Image.Name != "" {
			b.Why = "the same image as another value bound to this binary"
			out[i] = append(out[i], b)
		} else if refs == 1 && len(s.Mains) == 1 {
			b.Why = "the tree's only binary and the chart's only image"
			out[0] = append(out[0], b)
		}
	}
	if s.Tilt != nil && len(s.Charts) == 0 && len(s.Kustomizations) == 0 {
		for _, ref := range s.Tilt.Images {
			if i := matchTiltImage(ref, s.Mains, len(s.Tilt.Images)); i >= 0 {
				out[i] = append(out[i], binding{TiltRef: ref, Why: "the Tiltfile's docker_build of " + ref})
			}
		}
	}
	for _, k := range s.Kustomizations {
		i := matchKustomizeImage(k, s.Mains)
		if i >= 0 {
			out[i] = append(out[i], binding{Kust: k, Why: "the manager Deployment of " + k.Dir + " runs " + k.Image})
		}
	}
	return out
}

// matchKustomizeImage is the main whose binary a kustomization's manager
// runs: the one main of its module, or the one named like the image.
func matchKustomizeImage(k *kustomization, mains []goMain) int {
	var inModule []int
	for i, m := range mains {
		if m.Module.Dir == "." || strings.HasPrefix(k.Dir, m.Module.Dir+"/") {
			inModule = append(inModule, i)
		}
	}
	for _, i := range inModule {
		if normal(path.Base(repoPath(k.Image))) == normal(mains[i].Name) {
			return i
		}
	}
	if len(inModule) == 1 {
		return inModule[0]
	}
	return -1
}

// matchTiltImage is the main a Tiltfile image is built from: the one named
// like it, or the only main when the Tiltfile builds one image.
func matchTiltImage(ref string, mains []goMain, refs int) int {
	for i, m := range mains {
		if normal(path.Base(repoPath(ref))) == normal(m.Name) {
			return i
		}
	}
	if refs == 1 && len(mains) == 1 {
		return 0
	}
	return -1
}
