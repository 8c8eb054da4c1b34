package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
)

const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// spawnValidator creates the pod <release>-validator running image, owned
// by this pod so it goes with it. Plain HTTP calls to the API server with
// the pod's ServiceAccount token: the sample stays standard-library only.
func spawnValidator(image string) error {
	token, err := os.ReadFile(serviceAccountDir + "/token")
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(serviceAccountDir + "/ca.crt")
	if err != nil {
		return err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	ns, name := os.Getenv("POD_NAMESPACE"), os.Getenv("VALIDATOR_NAME")
	no := false
	yes := true
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{
			"name": name, "namespace": ns,
			"labels": map[string]string{"app.kubernetes.io/name": "validator"},
			"ownerReferences": []map[string]any{{"apiVersion": "v1", "kind": "Pod",
				"name": os.Getenv("POD_NAME"), "uid": os.Getenv("POD_UID")}},
		},
		"spec": map[string]any{
			"restartPolicy":   "Never",
			"securityContext": map[string]any{"runAsNonRoot": yes, "runAsUser": 65532, "seccompProfile": map[string]string{"type": "RuntimeDefault"}},
			"containers": []map[string]any{{
				"name": "validator", "image": image,
				"securityContext": map[string]any{"allowPrivilegeEscalation": no, "capabilities": map[string]any{"drop": []string{"ALL"}}},
			}},
		},
	}
	body, _ := json.Marshal(pod)
	url := fmt.Sprintf("https://%s:%s/api/v1/namespaces/%s/pods", os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT"), ns)
	req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+string(token))
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusCreated || resp.StatusCode == http.StatusConflict {
		return nil
	}
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return fmt.Errorf("%s: %s", resp.Status, msg)
}
