package plan

import (
	"testing"

	. "github.com/onsi/gomega"
)

func TestRenderTag(t *testing.T) {
	g := NewWithT(t)
	tag, err := RenderTag("{{ .ShortRevision }}-{{.Image}}", TagValues{ShortRevision: "0123456789ab", Image: "team/ctl"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tag).To(Equal("0123456789ab-team-ctl"))
	_, err = RenderTag("-{{ .Revision }}", TagValues{Revision: "abc"})
	g.Expect(err).To(MatchError(ContainSubstring("not a valid tag")))
	_, err = RenderTag("{{ .Revision", TagValues{})
	g.Expect(err).To(HaveOccurred())
}
