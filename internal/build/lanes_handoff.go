package build

// A superseded warm build (its inputs changed while it compiled) has its
// exec streams closed at once, but its processes compile on in the pod
// until the next build's claim there kills them. Were its lane left when
// its streams close, another image's build queued for the lane would take
// it and compile beside those processes (seen on Volcano's real tree),
// and the successor, whose claim would stop them, would queue behind it.
// So the superseded build hands its lane to its successor in the same pod
// (which starts after it: builds of one pod take turns), and the lane is
// left only when a build ends on its own.

// laneHandoff is a lane held by a superseded build for its pod's next.
type laneHandoff struct {
	lane  string
	leave func()
}

// leaveOrHandOff ends run's hold of lane: handed to the pod's next build
// when run was superseded, left otherwise.
func (w *warmBuilds) leaveOrHandOff(pod string, run *warmRun, lane string, leave func()) {
	w.mu.Lock()
	superseded := run.superseded
	var stale func()
	if superseded && lane != "" {
		if old, ok := w.handoffs[pod]; ok {
			stale = old.leave
		}
		w.handoffs[pod] = laneHandoff{lane: lane, leave: leave}
	}
	w.mu.Unlock()
	if stale != nil {
		stale()
	}
	if !superseded || lane == "" {
		leave()
	}
}

// takeHandoff returns the hold of lane a superseded build of pod handed
// over, now held by holder; a hold of another lane (the claim or
// platform changed) is left, and false is returned.
func (w *warmBuilds) takeHandoff(pod, lane, holder string) (func(), bool) {
	w.mu.Lock()
	h, ok := w.handoffs[pod]
	delete(w.handoffs, pod)
	w.mu.Unlock()
	if !ok {
		return nil, false
	}
	if h.lane != lane {
		h.leave()
		return nil, false
	}
	w.lanes.setHolder(lane, holder)
	return h.leave, true
}
