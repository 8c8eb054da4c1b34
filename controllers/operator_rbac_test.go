package controllers_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/internal/testenv"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// The suite's operator is not the test admin: it has the chart's rights
// and nothing else, so every other test in this package shows what an
// installed operator can do.
func TestSuiteOperatorHasOnlyTheChartsRights(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := operatortest.Namespace(t)
	operator, err := client.New(operatortest.OperatorConfig, client.Options{Scheme: testenv.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(operator.List(ctx, &v1alpha1.DevEnvironmentList{}, client.InNamespace(ns))).To(Succeed())
	for _, denied := range []client.ObjectList{&corev1.SecretList{}, &corev1.ConfigMapList{}, &corev1.PersistentVolumeClaimList{}} {
		err := operator.List(ctx, denied, client.InNamespace(ns))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing %T as the operator: %v", denied, err)
	}
	cm := &corev1.ConfigMap{}
	cm.Namespace, cm.Name = ns, "by-the-operator"
	g.Expect(apierrors.IsForbidden(operator.Create(ctx, cm))).To(BeTrue(), "the operator creates nothing an environment deploys")
}
