package controllers_test

import (
	"context"
	"testing"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/devloop-dev/devloop/api/v1alpha1"
	"github.com/devloop-dev/devloop/test/operatortest"
)

// What the reconciler does for an environment outside a deploy is done as
// the environment's ServiceAccount too, so creating a DevEnvironment
// lends no rights: a ServiceAccount that may not create Jobs gets no
// builder pod, one that may not read a Secret cannot have the operator
// read it for it.
func TestEnvironmentGainsNoRightsThroughTheOperator(t *testing.T) {
	cases := []struct {
		name   string
		allow  []string // job verbs the ServiceAccount has
		mutate func(env *v1alpha1.DevEnvironment)
		want   []string
	}{
		{"a builder Job", []string{"deletecollection"}, func(env *v1alpha1.DevEnvironment) {
			env.Spec.Components[0].Images[0].Run.Cache = nil
		}, []string{"cannot create builder job", `cannot create resource "jobs"`, "system:serviceaccount:%s:nobody"}},
		{"a build cache claim", []string{"deletecollection", "create"}, func(env *v1alpha1.DevEnvironment) {},
			[]string{"build cache claim", `"persistentvolumeclaims"`, "system:serviceaccount:%s:nobody"}},
		{"the registry credentials Secret", nil, func(env *v1alpha1.DevEnvironment) {
			env.Spec.Registry.CredentialsRef = &v1alpha1.LocalObjectReference{Name: "push-secret"}
			env.Spec.Components[0].Images[0].Run = nil
		}, []string{"spec.registry.credentialsRef", `cannot get resource "secrets"`, "system:serviceaccount:%s:nobody"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			ns := operatortest.Namespace(t)
			operatortest.UseDeployEngine(ns)
			operatortest.CreateServiceAccount(t, ns, "nobody")
			if tc.allow != nil {
				operatortest.Allow(t, ns, "nobody", rbacv1.PolicyRule{APIGroups: []string{"batch"}, Resources: []string{"jobs"}, Verbs: tc.allow})
			}
			// The operator itself could do all of it.
			g.Expect(operatortest.Admin.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "push-secret"},
				Type:       corev1.SecretTypeDockerConfigJson,
				StringData: map[string]string{corev1.DockerConfigJsonKey: `{"auths":{}}`},
			})).To(Succeed())
			operatortest.AppFiles(t, ns, map[string]string{"cmd/api/main.go": "package main\n", "out/api": "binary"})
			env := operatortest.APIEnv(ns)
			env.Spec.ServiceAccountName = "nobody"
			env.Spec.Components[0].Images[0].Platforms = []string{"linux/amd64"}
			tc.mutate(env)
			g.Expect(operatortest.Admin.Create(ctx, env)).To(Succeed())
			env = operatortest.WaitForEnv(t, client.ObjectKeyFromObject(env), func(g Gomega, env *v1alpha1.DevEnvironment) {
				stalled := operatortest.EnvCondition(env, v1alpha1.ConditionStalled)
				g.Expect(stalled).NotTo(BeNil())
				for _, w := range tc.want {
					if w == "system:serviceaccount:%s:nobody" {
						w = "system:serviceaccount:" + ns + ":nobody"
					}
					g.Expect(stalled.Message).To(ContainSubstring(w))
				}
			})
			g.Consistently(func(g Gomega) {
				g.Expect(operatortest.BuilderJobs(g, ns)).To(BeEmpty())
			}, "300ms").Should(Succeed())
			operatortest.ExpectKstatus(t, env, status.FailedStatus)
		})
	}
}
