// Package deploy holds the deployment artifacts of gazconsumer consumers:
// the image (Dockerfile), and Kubernetes manifests built with kustomize on
// Gazette's own bases (k8s/: a generic consumer group in base/consumer, the
// example bank in overlays/bank, and a verbatim copy of Gazette's broker and
// etcd bases in gazette/). docs/deploy.md walks through using them.
//
// It has no Go code: its test renders overlays/bank with `kubectl
// kustomize` and checks the manifests against the binaries they run (the
// example's consumers, gazctl and Gazette's broker), their flags and
// environment variables, ports, probes, grace periods, and the objects they
// reference.
package deploy
