package main

import (
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// defaultLeaderElectionID is the lease of an operator that watches every
// environment (no --watch-label-selector).
const defaultLeaderElectionID = "devloop-manager.devloop.dev"

// shard is the part of the environments one operator instance reconciles,
// as Flux shards its controllers: the instances of one shard elect a
// leader among themselves, on a lease of their own, so each shard has one
// active instance.
type shard struct {
	// selector selects the DevEnvironments of the shard by label; nil
	// selects them all.
	selector labels.Selector
	// leaderElectionID names the shard's lease.
	leaderElectionID string
}

func (s shard) selectorString() string {
	if s.selector == nil {
		return ""
	}
	return s.selector.String()
}

type shardFlags struct {
	selector, leaderElectionID string
}

func registerShardFlags(fs *flag.FlagSet) *shardFlags {
	f := &shardFlags{}
	fs.StringVar(&f.selector, "watch-label-selector", "", "reconcile only the DevEnvironments whose labels match this selector, e.g. sharding.devloop.dev/key=shard1 for a shard and '!sharding.devloop.dev/key' for the instance that takes the rest (all of them when empty)")
	fs.StringVar(&f.leaderElectionID, "leader-election-id", "", "name of the Lease the instances of this shard elect their leader on; empty: "+defaultLeaderElectionID+" without --watch-label-selector, else one derived from the selector")
	return f
}

func (f *shardFlags) shard() (shard, error) {
	var s shard
	if f.selector != "" {
		sel, err := labels.Parse(f.selector)
		if err != nil {
			return s, fmt.Errorf("--watch-label-selector %q: %w", f.selector, err)
		}
		if !sel.Empty() {
			s.selector = sel
		}
	}
	s.leaderElectionID = f.leaderElectionID
	switch {
	case s.leaderElectionID != "":
		if errs := validation.IsDNS1123Subdomain(s.leaderElectionID); len(errs) > 0 {
			return s, fmt.Errorf("--leader-election-id %q: %s", s.leaderElectionID, errs[0])
		}
	case s.selector == nil:
		s.leaderElectionID = defaultLeaderElectionID
	default:
		s.leaderElectionID = shardLeaseName(s.selector)
	}
	return s, nil
}

// shardLeaseName is the lease of the shard sel selects: the same for
// every instance given the same selector however it is written (the
// parsed selector's string is canonical: requirements sorted), different
// for another shard, so shards never wait on each other's leader.
func shardLeaseName(sel labels.Selector) string {
	sum := sha256.Sum256([]byte(sel.String()))
	return "devloop-manager-" + hex.EncodeToString(sum[:5]) + ".devloop.dev"
}
