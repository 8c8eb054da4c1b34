// Command provisioner gives the local cluster dynamic volumes: a host
// directory per PersistentVolumeClaim of the default StorageClass "local",
// as kind's local-path provisioner does, so builder Jobs get their cache
// claims bound. It runs as a host process next to the kubelet
// (hack/cluster/cluster.sh). Its volumes are pinned to the nodes --node
// names: one for a node-local disk ("local", node 1); with two nodes on
// this machine, node2.sh runs a second one for the class "local-shared"
// naming both, as a network disk any node attaches.
//
// It polls rather than watches: claims are few, and a poll loop has no
// state to lose when the apiserver restarts.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// Name of the provisioner of every class it serves.
const provisioner = "devloop.dev/host-path"

func main() {
	kubeconfig := flag.String("kubeconfig", "", "admin kubeconfig")
	root := flag.String("root", "", "directory holding the volumes")
	nodes := flag.String("node", "devloop", "the nodes the volumes may be used on, comma-separated")
	class := flag.String("class", "local", "the StorageClass served (made when missing)")
	isDefault := flag.Bool("default-class", true, "make the class the cluster's default")
	interval := flag.Duration("interval", time.Second, "how often claims are looked at")
	flag.Parse()
	if *kubeconfig == "" || *root == "" {
		log.Fatal("--kubeconfig and --root are required")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatal(err)
	}
	p := &hostPaths{k8s: kubernetes.NewForConfigOrDie(cfg), root: *root, nodes: strings.Split(*nodes, ","), class: *class, isDefault: *isDefault}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	log.Printf("provisioning claims of StorageClass %q under %s for nodes %s", p.class, *root, *nodes)
	for {
		if err := p.ensureClass(ctx); err != nil {
			log.Printf("storage class: %v", err)
		} else if err := p.sync(ctx); err != nil {
			log.Printf("sync: %v", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(*interval):
		}
	}
}

type hostPaths struct {
	k8s       kubernetes.Interface
	root      string
	nodes     []string
	class     string
	isDefault bool
}

// ensureClass makes the StorageClass once.
func (p *hostPaths) ensureClass(ctx context.Context) error {
	_, err := p.k8s.StorageV1().StorageClasses().Get(ctx, p.class, metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		return err
	}
	del := corev1.PersistentVolumeReclaimDelete
	bind := storagev1.VolumeBindingImmediate
	sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: p.class}}
	if p.isDefault {
		sc.Annotations = map[string]string{"storageclass.kubernetes.io/is-default-class": "true"}
	}
	_, err = p.k8s.StorageV1().StorageClasses().Create(ctx, &storagev1.StorageClass{
		ObjectMeta:  sc.ObjectMeta,
		Provisioner: provisioner, ReclaimPolicy: &del, VolumeBindingMode: &bind,
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// sync makes a volume for every pending claim of the class and removes the
// volumes their claims released.
func (p *hostPaths) sync(ctx context.Context) error {
	claims, err := p.k8s.CoreV1().PersistentVolumeClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Status.Phase != corev1.ClaimPending || c.Spec.VolumeName != "" || c.DeletionTimestamp != nil {
			continue
		}
		if c.Spec.StorageClassName == nil || *c.Spec.StorageClassName != p.class {
			continue
		}
		if err := p.provision(ctx, c); err != nil {
			log.Printf("claim %s/%s: %v", c.Namespace, c.Name, err)
		}
	}
	vols, err := p.k8s.CoreV1().PersistentVolumes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range vols.Items {
		v := &vols.Items[i]
		if v.Spec.StorageClassName != p.class || v.Status.Phase != corev1.VolumeReleased ||
			v.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete || v.Spec.HostPath == nil {
			continue
		}
		if err := os.RemoveAll(v.Spec.HostPath.Path); err != nil {
			log.Printf("volume %s: %v", v.Name, err)
			continue
		}
		err := p.k8s.CoreV1().PersistentVolumes().Delete(ctx, v.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			log.Printf("volume %s: %v", v.Name, err)
			continue
		}
		log.Printf("deleted volume %s (%s)", v.Name, v.Spec.HostPath.Path)
	}
	return nil
}

// provision makes the claim's directory and a volume bound to it. The
// directory is world-writable: builder and test pods run as arbitrary
// non-root users, and a hostPath volume has no fsGroup handling.
func (p *hostPaths) provision(ctx context.Context, c *corev1.PersistentVolumeClaim) error {
	name := "pvc-" + string(c.UID)
	dir := filepath.Join(p.root, name)
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return err
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		return err
	}
	size := c.Spec.Resources.Requests[corev1.ResourceStorage]
	hostType := corev1.HostPathDirectory
	pv := &corev1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{"pv.kubernetes.io/provisioned-by": provisioner}},
		Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: size},
			AccessModes:                   c.Spec.AccessModes,
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimDelete,
			StorageClassName:              p.class,
			ClaimRef: &corev1.ObjectReference{Kind: "PersistentVolumeClaim", APIVersion: "v1",
				Namespace: c.Namespace, Name: c.Name, UID: c.UID},
			PersistentVolumeSource: corev1.PersistentVolumeSource{
				HostPath: &corev1.HostPathVolumeSource{Path: dir, Type: &hostType}},
			NodeAffinity: &corev1.VolumeNodeAffinity{Required: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: p.nodes}}}}}},
		},
	}
	if size.IsZero() {
		pv.Spec.Capacity = nil
		return fmt.Errorf("no storage request")
	}
	_, err := p.k8s.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	if err == nil {
		log.Printf("claim %s/%s: volume %s at %s", c.Namespace, c.Name, name, dir)
	}
	return err
}
