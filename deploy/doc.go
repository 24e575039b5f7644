// Package deploy holds what runs presence elsewhere than `make run`: the
// image (Dockerfile), three nodes with PostgreSQL and demo devices on one
// Docker host (compose.yaml, secrets from a copy of env.example; the
// PostgreSQL image is built from the host's Debian package by
// postgres/build.sh) and the Kubernetes manifests (k8s/). docs/deploy.md
// walks through each. Its test (build tag compose) brings the compose
// cluster up with PostgreSQL, kills a node and takes it down again.
package deploy
