package v1alpha1

import (
	"slices"
	"strings"
	"testing"
)

func TestParseDebugList(t *testing.T) {
	got, err := ParseDebugList(" worker/w, api/server,,api/server ")
	if err != nil {
		t.Fatal(err)
	}
	want := []DebugTarget{{"api", "server"}, {"worker", "w"}}
	if !slices.Equal(got, want) {
		t.Errorf("ParseDebugList = %v, want %v", got, want)
	}
	got, err = ParseDebugList("api,api/server,/x,a/b/c")
	if err == nil || !strings.Contains(err.Error(), `"api", "/x", "a/b/c"`) {
		t.Errorf("malformed entries: error %v, want one naming them", err)
	}
	if !slices.Equal(got, []DebugTarget{{"api", "server"}}) {
		t.Errorf("malformed entries: kept %v, want the well-formed one", got)
	}
	if s := FormatDebugList([]DebugTarget{{"b", "y"}, {"a", "x"}, {"b", "y"}}); s != "a/x,b/y" {
		t.Errorf("FormatDebugList = %q, want a/x,b/y", s)
	}
	env := &DevEnvironment{}
	env.Annotations = map[string]string{DebugAnnotation: "api/server"}
	if !env.DebugsImage("server") || env.DebugsImage("api") {
		t.Errorf("DebugsImage: server should be debugged, api not")
	}
}
