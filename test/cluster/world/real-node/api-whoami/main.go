// Command api-whoami asks the API server who it is, as an agent sidecar reporting to the control
// plane does: the pod's service-account token and CA from their projected volume, the API server
// from the environment the kubelet sets, a SelfSubjectReview, and the answer's username on stdout.
// busybox's wget cannot speak TLS with kube-apiserver, hence this.
package main

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

const accountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func main() {
	username, err := whoami()
	if err != nil {
		fmt.Fprintln(os.Stderr, "api-whoami:", err)
		os.Exit(1)
	}
	fmt.Println(username)
}

func whoami() (string, error) {
	token, err := os.ReadFile(accountDir + "/token")
	if err != nil {
		return "", err
	}
	caPEM, err := os.ReadFile(accountDir + "/ca.crt")
	if err != nil {
		return "", err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		return "", fmt.Errorf("no certificate in %s/ca.crt", accountDir)
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		return "", fmt.Errorf("KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set")
	}
	client := &http.Client{
		Timeout: 10 * time.Second,
		// The serving certificate names kubernetes.default.svc; the address is the Service's IP.
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, ServerName: "kubernetes.default.svc"}},
	}
	body := []byte(`{"apiVersion":"authentication.k8s.io/v1","kind":"SelfSubjectReview"}`)
	req, err := http.NewRequest(http.MethodPost, "https://"+net.JoinHostPort(host, port)+"/apis/authentication.k8s.io/v1/selfsubjectreviews", bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+string(bytes.TrimSpace(token)))
	req.Header.Set("Content-Type", "application/json")
	res, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if err != nil {
		return "", err
	}
	if res.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("HTTP %d: %s", res.StatusCode, answer)
	}
	var review struct {
		Status struct {
			UserInfo struct {
				Username string `json:"username"`
			} `json:"userInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal(answer, &review); err != nil {
		return "", err
	}
	return review.Status.UserInfo.Username, nil
}
