package controllers_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/builder"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// tarpit accepts git connections and never answers: every reconcile
// fetching from it holds its worker until the connection is given up.
type tarpit struct {
	ln net.Listener

	mu             sync.Mutex
	conns          []net.Conn
	opened, closed int // connections accepted, and closed by the operator
}

func newTarpit(t *testing.T) *tarpit {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tp := &tarpit{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tp.mu.Lock()
			tp.conns, tp.opened = append(tp.conns, c), tp.opened+1
			tp.mu.Unlock()
			go func() {
				// Reads until the operator gives up on the request.
				buf := make([]byte, 4096)
				for {
					if _, err := c.Read(buf); err != nil {
						tp.mu.Lock()
						tp.closed++
						tp.mu.Unlock()
						return
					}
				}
			}()
		}
	}()
	// Closing every connection ends the reconciles stuck on it, so the
	// environments can be deleted and the workers go to the next tests.
	t.Cleanup(func() {
		ln.Close()
		tp.mu.Lock()
		defer tp.mu.Unlock()
		for _, c := range tp.conns {
			c.Close()
		}
	})
	return tp
}

func (tp *tarpit) counts() (opened, closed int) {
	tp.mu.Lock()
	defer tp.mu.Unlock()
	return tp.opened, tp.closed
}

// TestSlowNamespaceDoesNotHoldEveryWorker: team-a's four environments
// fetch from a git server that never answers and would hold all four
// workers until the fetch gives up (minutes). team-b's environment,
// created while they hang, is reconciled to Ready before any of team-a's
// reconciles ends: team-a holds only its share of the workers.
func TestSlowNamespaceDoesNotHoldEveryWorker(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	tp := newTarpit(t)
	teamA, teamB := operatortest.Namespace(t), operatortest.Namespace(t)

	for i := range 4 {
		src := v1alpha1.Source{Name: "app", Git: &v1alpha1.GitSource{
			URL: fmt.Sprintf("http://%s/team-a/app-%d.git", tp.ln.Addr(), i)}}
		operatortest.Env(teamA, fmt.Sprintf("slow-%d", i)).Source(src).
			Components(builder.Component("app", builder.Manifests())).Create(t, operatortest.Admin)
	}
	// team-a's reconciles are stuck in the tarpit: two with the default
	// share of the suite's four workers (all four without it).
	g.Eventually(func() int { opened, _ := tp.counts(); return opened }, operatortest.Timeout).Should(BeNumerically(">=", 2))

	start := time.Now()
	fast := operatortest.Env(teamB, "fast").Source(operatortest.SharedOCISource()).Components(operatortest.ScriptedComponent("app")).Create(t, operatortest.Admin)
	var readyAt time.Duration
	g.Eventually(func(g Gomega) {
		env := &v1alpha1.DevEnvironment{}
		g.Expect(operatortest.Admin.Get(ctx, client.ObjectKeyFromObject(fast), env)).To(Succeed())
		operatortest.ExpectReadyAndCurrent(g, env)
	}, time.Minute, 100*time.Millisecond).Should(Succeed(), "team-b's environment is not Ready while team-a's reconciles hang")
	readyAt = time.Since(start)

	opened, closed := tp.counts()
	t.Logf("team-b Ready after %s; team-a's tarpit connections: %d opened, %d given up", readyAt.Round(time.Millisecond), opened, closed)
	g.Expect(closed).To(BeZero(), "team-b waited for one of team-a's reconciles to end")
	g.Expect(opened).To(BeNumerically("<", 4), "team-a held every worker")
}
