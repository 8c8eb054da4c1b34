package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
)

// PodLogs reads container logs through the API server.
type PodLogs struct {
	Clientset kubernetes.Interface
}

// TailLog returns the last lines of a container's log.
func (p PodLogs) TailLog(ctx context.Context, namespace, pod, container string, lines int64) (string, error) {
	limit := int64(64 * 1024)
	b, err := p.Clientset.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{
		Container: container, TailLines: &lines, LimitBytes: &limit,
	}).DoRaw(ctx)
	return string(b), err
}
