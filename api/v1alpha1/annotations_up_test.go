package v1alpha1

import (
	"slices"
	"testing"
)

func TestUpListAndIsEnabled(t *testing.T) {
	if got := ParseUpList(" monitoring,kwok,,kwok "); !slices.Equal(got, []string{"kwok", "monitoring"}) {
		t.Fatalf("ParseUpList: %v", got)
	}
	if got := FormatUpList([]string{"b", "a", "b"}); got != "a,b" {
		t.Fatalf("FormatUpList: %q", got)
	}
	off := false
	for _, tc := range []struct {
		c    Component
		up   []string
		want bool
	}{
		{Component{Name: "web"}, nil, true},
		{Component{Name: "web", Enabled: &off}, []string{"web"}, false},
		{Component{Name: "kwok", OnDemand: true}, nil, false},
		{Component{Name: "kwok", OnDemand: true}, []string{"kwok"}, true},
		{Component{Name: "kwok", OnDemand: true, Enabled: &off}, []string{"kwok"}, false},
	} {
		if got := tc.c.IsEnabled(tc.up); got != tc.want {
			t.Errorf("%+v with up %v: IsEnabled %v, want %v", tc.c, tc.up, got, tc.want)
		}
	}
}
