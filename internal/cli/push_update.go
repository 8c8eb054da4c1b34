package cli

import (
	"fmt"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// howUpdated says, for each live-updatable image of the components a push
// affected, how its newest digest reached the pods: "web/web: live
// update (synced in place: /web)" or "web/web: rollout: /srv/x changed,
// outside liveUpdate.paths". Images without liveUpdate always roll out
// and are not listed.
func howUpdated(env *v1alpha1.DevEnvironment, affected []string) []string {
	var out []string
	for _, name := range affected {
		c := env.Spec.Component(name)
		if c == nil {
			continue
		}
		for _, img := range c.Images {
			ist := env.Status.Component(name).Image(img.Name)
			if img.LiveUpdate == nil || ist == nil || ist.LastUpdate == "" {
				continue
			}
			line := name + "/" + img.Name + ": "
			switch ist.LastUpdate {
			case v1alpha1.UpdateLive:
				line += "live update"
				if ist.UpdateReason != "" {
					line += " (" + ist.UpdateReason + ")"
				}
			default:
				line += "rollout"
				if ist.UpdateReason != "" {
					line += ": " + ist.UpdateReason
				}
			}
			out = append(out, line)
		}
	}
	return out
}

// printHowUpdated prints howUpdated's lines after a push's rollout.
func (a *app) printHowUpdated(env *v1alpha1.DevEnvironment, affected []string) {
	for _, line := range howUpdated(env, affected) {
		fmt.Fprintln(a.out(), printable(line))
	}
}
