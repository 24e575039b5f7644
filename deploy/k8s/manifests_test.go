// Package k8s holds presence's Kubernetes manifests. This test, in a Go
// module of its own so that the service's module does not depend on the
// Kubernetes API, decodes every manifest strictly into the API types of
// its kind (an unknown or misspelt field fails) and checks what the
// deployment relies on: seeds by DNS, readiness, drain within the grace
// period, the budget's selector, secrets from the Secret.
package k8s

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// decode reads every document of a manifest into the type of its kind,
// strictly.
func decode(data []byte) ([]any, error) {
	var out []any
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		var obj any
		switch tm.APIVersion + "/" + tm.Kind {
		case "apps/v1/StatefulSet":
			obj = &appsv1.StatefulSet{}
		case "v1/Service":
			obj = &corev1.Service{}
		case "v1/Secret":
			obj = &corev1.Secret{}
		case "policy/v1/PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		default:
			return nil, fmt.Errorf("document %d: no API type for %s %s", i, tm.APIVersion, tm.Kind)
		}
		// As the API server decodes: field names case-sensitive, unknown
		// and duplicate fields errors (encoding/json would take
		// "clusterIp" for clusterIP).
		j, err := yaml.YAMLToJSONStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
		strict, err := kjson.UnmarshalStrict(j, obj)
		if err = errors.Join(append(strict, err)...); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, tm.Kind, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

func load(t *testing.T) map[string]any {
	t.Helper()
	files, _ := filepath.Glob("*.yaml")
	if len(files) < 4 {
		t.Fatalf("manifests: %v", files)
	}
	objs := map[string]any{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := decode(b)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, d := range docs {
			m := d.(metav1.Object)
			objs[fmt.Sprintf("%T/%s", d, m.GetName())] = d
		}
	}
	return objs
}

func TestManifestsDecodeStrictly(t *testing.T) { load(t) }

// The check can fail: a misspelt field, a field of the wrong type and an
// unknown kind are refused.
func TestUnknownFieldFails(t *testing.T) {
	for _, bad := range []string{
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  clusterIp: None\n",
		"apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: x}\nspec:\n  replicas: three\n",
		"apiVersion: v1\nkind: Servise\nmetadata: {name: x}\n",
		"apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  clusterIP: None\n  clusterIP: 10.0.0.1\n",
	} {
		if _, err := decode([]byte(bad)); err == nil {
			t.Errorf("accepted:\n%s", bad)
		}
	}
}

func TestStatefulSet(t *testing.T) {
	objs := load(t)
	ss := objs["*v1.StatefulSet/presence"].(*appsv1.StatefulSet)
	gossip := objs["*v1.Service/presence-gossip"].(*corev1.Service)
	pdb := objs["*v1.PodDisruptionBudget/presence"].(*policyv1.PodDisruptionBudget)
	pod := ss.Spec.Template
	c := pod.Spec.Containers[0]
	args := strings.Join(c.Args, " ")
	if ss.Spec.ServiceName != gossip.Name || gossip.Spec.ClusterIP != corev1.ClusterIPNone || !gossip.Spec.PublishNotReadyAddresses ||
		!strings.Contains(args, "--join="+gossip.Name+":7946") || !strings.Contains(args, "--advertise=$(POD_IP)") {
		t.Errorf("seeds by the headless Service's name, unready pods included, advertised at the pod IP: %s", args)
	}
	if p := c.ReadinessProbe; p == nil || p.HTTPGet == nil || p.HTTPGet.Path != "/readyz" {
		t.Errorf("readiness on /readyz: %+v", p)
	}
	pre := c.Lifecycle.PreStop
	if pre == nil || pre.Sleep == nil || !strings.Contains(args, "--drain-spread=10s") ||
		*pod.Spec.TerminationGracePeriodSeconds < pre.Sleep.Seconds+10+10 {
		t.Errorf("preStop + drain spread + stop within the grace period")
	}
	for k, v := range pdb.Spec.Selector.MatchLabels {
		if pod.Labels[k] != v {
			t.Errorf("the budget's selector %s=%s does not match the pods", k, v)
		}
	}
	secrets := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			secrets[e.Name] = true
		}
	}
	for _, n := range []string{"PRESENCE_SECRET", "PRESENCE_ADMIN_TOKEN", "PRESENCE_CLUSTER_KEY", "PRESENCE_POLICY_DSN"} {
		if !secrets[n] {
			t.Errorf("%s not from the Secret", n)
		}
	}
	if c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Error("memory request and limit")
	}
}
