package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// node is one line of a tree and the lines under it.
type node struct {
	text     string
	children []*node
}

func (n *node) add(text string) *node {
	c := &node{text: text}
	n.children = append(n.children, c)
	return c
}

// write prints the children of n with box-drawing prefixes.
func (n *node) write(w io.Writer, indent string) {
	for i, c := range n.children {
		branch, next := "├─ ", "│  "
		if i == len(n.children)-1 {
			branch, next = "└─ ", "   "
		}
		fmt.Fprintf(w, "%s%s%s\n", indent, branch, c.text)
		c.write(w, indent+next)
	}
}

// renderTree prints the environment as a tree: a header with Ready and
// Stalled, the sources, the components in DAG order with their dependencies,
// images, build, release and message, and every suite's latest run. now
// makes the ages reproducible in tests.
func renderTree(w io.Writer, v *StatusView, p palette, now time.Time) {
	fmt.Fprintln(w, header(v, p))
	root := &node{}
	if v.PlanError != "" {
		root.add(p.state("Failed") + " plan: " + v.PlanError)
	}
	if len(v.Sources) > 0 {
		srcs := root.add(p.bold("sources"))
		for _, s := range v.Sources {
			rev := p.faint("not resolved yet")
			if s.Revision != "" {
				rev = shortRevision(s.Revision)
			}
			srcs.add(s.Name + "  " + rev)
		}
	}
	if len(v.Components) > 0 {
		comps := root.add(p.bold("components"))
		for i := range v.Components {
			addComponent(comps, &v.Components[i], p)
		}
	}
	if len(v.Tests) > 0 {
		tests := root.add(p.bold("tests"))
		for i := range v.Tests {
			addTest(tests, &v.Tests[i], p, now)
		}
	}
	root.write(w, "")
}

func header(v *StatusView, p palette) string {
	h := fmt.Sprintf("devenvironment/%s (namespace %s)", p.bold(v.Name), v.Namespace)
	r := meta.FindStatusCondition(v.Conditions, v1alpha1.ConditionReady)
	switch {
	case r == nil:
		h += "  " + p.state("Unknown") + "  no status yet: is the devloop operator running?"
	case r.Status == "True":
		h += "  " + p.state("Ready") + "  " + printable(r.Message)
	default:
		h += "  " + p.state("NotReady") + " (" + printable(r.Reason) + ")"
	}
	if s := meta.FindStatusCondition(v.Conditions, v1alpha1.ConditionStalled); s != nil && s.Status == "True" {
		h += "\n" + p.state("Stalled") + " (" + printable(s.Reason) + "): " + printable(s.Message)
	} else if r != nil && r.Status != "True" && r.Message != "" {
		h += "\n" + printable(r.Message)
	}
	if v.ObservedGeneration != v.Generation {
		h += "\n" + p.faint(fmt.Sprintf("(spec generation %d not observed yet; status is of generation %d)", v.Generation, v.ObservedGeneration))
	}
	return h
}

func addComponent(parent *node, c *ComponentView, p palette) {
	phase := string(c.Phase)
	if phase == "" {
		phase = "Pending"
	}
	line := c.Name + "  " + p.state(phase)
	if len(c.DependsOn) > 0 {
		line += "  " + p.faint("← "+strings.Join(c.DependsOn, ", "))
	}
	n := parent.add(line)
	for _, img := range c.Images {
		text := "image " + img.Name
		if img.Digest != "" {
			text += "  " + img.Repository + "@" + shortDigest(img.Digest)
		}
		if len(img.Tags) > 0 {
			text += "  tags: " + strings.Join(img.Tags, ", ")
		}
		if img.Debug {
			text += "  " + p.state("Debug") + fmt.Sprintf(" build, delve on :%d", v1alpha1.DebugPort)
		}
		in := n.add(text)
		if b := img.Build; b != nil {
			builder := "build job/"
			if slices.Contains(c.WarmImages, img.Name) {
				builder = "warm builder pod/"
			}
			bt := builder + b.Job + "  " + p.state(string(b.Result))
			if b.ExitCode != nil {
				bt += fmt.Sprintf(" (exit %d)", *b.ExitCode)
			}
			bn := in.add(bt)
			// The build's last line of output, while it runs or as it
			// failed (kubectl devloop logs ENV COMPONENT/IMAGE has all).
			if last := lastLine(b.LogTail); last != "" && b.Result != v1alpha1.BuildSucceeded {
				if len(last) > 160 {
					last = last[:157] + "..."
				}
				bn.add(p.faint(last))
			}
		}
	}
	if r := c.Release; r != nil {
		text := fmt.Sprintf("release %s in %s", r.Name, r.Namespace)
		if r.Revision > 0 {
			text += fmt.Sprintf("  revision %d", r.Revision)
		}
		if r.Status != "" {
			text += "  " + r.Status
		}
		n.add(text)
	}
	if len(c.Inventory) > 0 {
		n.add(fmt.Sprintf("manifests: %d %s applied", len(c.Inventory), plural(len(c.Inventory), "object", "objects")))
	}
	if len(c.Drift) > 0 {
		n.add(p.state("Drift") + " corrected: " + strings.Join(c.Drift, "; "))
	}
	if c.Phase != v1alpha1.PhaseReady && c.Message != "" {
		n.add(p.faint(firstLine(c.Message)))
	}
}

func addTest(parent *node, t *TestView, p palette, now time.Time) {
	line := t.Name
	if r := t.LastRun; r != nil {
		line += fmt.Sprintf("  #%d %s", r.Number, p.state(string(r.Result)))
		var details []string
		if s := paramsText(r.Params); s != "" {
			details = append(details, s)
		}
		if r.ExitCode != nil {
			details = append(details, fmt.Sprintf("exit %d", *r.ExitCode))
		}
		if c := resultCounts(r.Results); c != "" {
			details = append(details, c)
		}
		if r.CompletionTime != nil {
			details = append(details, ago(now.Sub(r.CompletionTime.Time)))
		} else if r.StartTime != nil {
			details = append(details, "started "+ago(now.Sub(r.StartTime.Time)))
		}
		if len(details) > 0 {
			line += " (" + strings.Join(details, ", ") + ")"
		}
	} else {
		line += "  " + p.faint("never run")
	}
	if len(t.DependsOn) > 0 {
		line += "  " + p.faint("← "+strings.Join(t.DependsOn, ", "))
	}
	n := parent.add(line)
	if t.Message != "" {
		n.add(p.faint(firstLine(t.Message)))
	}
	if r := t.LastRun; r != nil && r.Result != v1alpha1.ResultPassed && r.Result != v1alpha1.ResultRunning && r.Result != v1alpha1.ResultPending && r.LogTail != "" {
		n.add("log: " + lastLine(r.LogTail))
	}
	if r := t.LastRun; r != nil {
		for _, l := range resultLines(r.Results) {
			n.add(l)
		}
	}
}

// ago is a coarse age: 45s ago, 3m ago, 2h ago, 4d ago.
func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}

// lastLine is the last line of a log tail, printable.
func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	if i := strings.LastIndex(s, "\n"); i >= 0 {
		return printable(s[i+1:])
	}
	return printable(s)
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
