package controllers

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/devloop-dev/devloop/api/v1alpha1"
)

// PodExecutor runs a command in a container of a running pod, as the
// environment's ServiceAccount, streaming its output.
type PodExecutor interface {
	Exec(ctx context.Context, env *v1alpha1.DevEnvironment, namespace, pod, container string, command []string, stdout, stderr io.Writer) error
}

// Exec runs command in the pod through the API server's exec subresource,
// impersonating the environment's ServiceAccount: it needs create on
// pods/exec, as `kubectl exec` would; the operator itself has no such
// right (with --allow-operator-identity, warm builds are refused). A
// command that exits non-zero gives a
// k8s.io/client-go/util/exec.CodeExitError.
func (e *DeployEngine) Exec(ctx context.Context, env *v1alpha1.DevEnvironment, namespace, pod, container string, command []string, stdout, stderr io.Writer) error {
	user, err := e.identity(env)
	if err != nil {
		return err
	}
	cfg := e.restConfig(user)
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	req := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(namespace).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: container, Command: command, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	ex, err := remotecommand.NewSPDYExecutor(cfg, "POST", req.URL())
	if err != nil {
		return fmt.Errorf("exec in pod %s/%s: %w", namespace, pod, err)
	}
	return ex.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: stdout, Stderr: stderr})
}
