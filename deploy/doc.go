// Package deploy holds what runs presence elsewhere than `make run`: the
// image (Dockerfile), three nodes with PostgreSQL and demo devices on one
// Docker host (compose.yaml, secrets from a copy of env.example; the
// PostgreSQL image is built from the host's Debian package by
// postgres/build.sh), the Kubernetes manifests (k8s/), Prometheus alert
// rules (prometheus/) and a Grafana dashboard (grafana/) on the metrics of
// docs/operations.md. docs/deploy.md walks through each. Its compose test
// (build tag compose) brings the compose cluster up with PostgreSQL, kills
// a node and takes it down again; TestAlertRules and TestGrafanaDashboard
// check the rules (with promtool) and the dashboard's queries against the
// metrics a node exports.
package deploy
