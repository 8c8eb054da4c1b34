package install

import (
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
)

// With shards, the chart installs one more manager Deployment per shard,
// reconciling the environments labelled with it, while the main one takes
// only those without the label; no Deployment's selector matches another
// Deployment's pods, and each shard's metrics are served and scraped.
func TestChartShards(t *testing.T) {
	objs := renderChart(t, everything())
	main := deploymentOf(t, objs, "devloop-manager")
	deployments := map[string]string{"": "devloop-manager"}
	for _, shard := range []string{"team-a", "team-b"} {
		deployments[shard] = "devloop-manager-" + shard
	}
	for shard, name := range deployments {
		d := deploymentOf(t, objs, name)
		args := d.Spec.Template.Spec.Containers[0].Args
		want := "--watch-label-selector=sharding.devloop.dev/key=" + shard
		if shard == "" {
			want = "--watch-label-selector=!sharding.devloop.dev/key"
		}
		if !slices.Contains(args, want) {
			t.Errorf("%s: args %q lack %s", name, args, want)
		}
		if !slices.Contains(args, "--leader-elect") || *d.Spec.Replicas != 2 {
			t.Errorf("%s: %d replicas, args %q: want every shard elected like the main manager", name, *d.Spec.Replicas, args)
		}
		// The main manager alone serves the bundled registry's tokens:
		// its arguments are longer, their ends the same.
		mainArgs := main.Spec.Template.Spec.Containers[0].Args
		if shard != "" && !slices.Equal(args[len(args)-8:], mainArgs[len(mainArgs)-8:]) {
			t.Errorf("%s: args %q end unlike the main manager's", name, args)
		}
		// Every other manager Deployment's pods stay out of this one's selector.
		selector := labels.SelectorFromSet(d.Spec.Selector.MatchLabels)
		for other, otherName := range deployments {
			pods := labels.Set(deploymentOf(t, objs, otherName).Spec.Template.Labels)
			if matches := selector.Matches(pods); matches != (other == shard) {
				t.Errorf("%s's selector %s matches %s's pods: %v", name, selector, otherName, matches)
			}
		}
		if shard == "" {
			continue
		}
		svc := find(t, objs, "Service", name+"-metrics")
		svcSelector, _, _ := unstructured.NestedStringMap(svc.Object, "spec", "selector")
		if !labels.SelectorFromSet(svcSelector).Matches(labels.Set(d.Spec.Template.Labels)) {
			t.Errorf("%s-metrics selects %v, not the shard's pods %v", name, svcSelector, d.Spec.Template.Labels)
		}
		if svc.GetLabels()["app.kubernetes.io/component"] != "manager" {
			t.Errorf("%s-metrics labels %v: the ServiceMonitor selects component=manager", name, svc.GetLabels())
		}
	}

	// Without shards the main manager takes every environment.
	args := deploymentOf(t, renderChart(t, nil), "devloop-manager").Spec.Template.Spec.Containers[0].Args
	if strings.Contains(strings.Join(args, " "), "--watch-label-selector") {
		t.Errorf("args %q select environments though no shard is installed", args)
	}
}

func TestChartRefusesBadShardNames(t *testing.T) {
	for _, shards := range [][]any{{"Team_A"}, {"a", "a"}, {strings.Repeat("x", 31)}} {
		_, err := tryRenderChart(map[string]any{"shards": shards})
		if err == nil || !strings.Contains(err.Error(), "shards") {
			t.Errorf("shards %q: %v, want an error naming shards", shards, err)
		}
	}
}
