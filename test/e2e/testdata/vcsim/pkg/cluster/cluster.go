// Package cluster is what the three binaries share, as Volcano's pkg/ is:
// a clientset and a shared informer factory from client-go, so each binary
// compiles the same large dependency graph.
package cluster

import (
	"context"
	"log"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// Watch counts the pods of the binary's namespace when it runs in a
// cluster with rights to list them; outside one (or without the rights)
// it logs why and the binary serves anyway.
func Watch(ctx context.Context, name string) {
	cfg, err := rest.InClusterConfig()
	if err != nil {
		log.Printf("%s: no cluster config (%v); serving without informers", name, err)
		return
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Printf("%s: %v", name, err)
		return
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cs, 10*time.Minute, informers.WithNamespace(namespace()))
	pods := factory.Core().V1().Pods().Informer()
	_, _ = pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if p, ok := obj.(*corev1.Pod); ok {
				log.Printf("%s: saw pod %s", name, p.Name)
			}
		},
	})
	factory.Start(ctx.Done())
}
