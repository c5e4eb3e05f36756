# sidecarset: see README.md. The quick start is `make playground` and `make test`.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
CONTROLLER_GEN := $(GO) tool -modfile=hack/tools/codegen/go.mod controller-gen
# The control-plane binaries are built once per version, outside the work tree.
ASSETS = $(shell hack/control-plane.sh)
TEST_FLAGS ?= -race -count=1 -timeout 30m

.PHONY: all build test e2e unit bench verify generate manifests fmt vet playground control-plane clean

all: build

build:
	$(GO) build ./...

control-plane:
	@hack/control-plane.sh >/dev/null

## test: unit and integration tests; integration runs a real kube-apiserver + etcd.
test: control-plane
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(TEST_FLAGS) ./...
	@echo "integration suite again, with simulated image pulls and container starts that take time"
	SIDECARSET_SIM_DELAY=400ms KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(TEST_FLAGS) ./test/integration/...
	cd test/chart && $(GO) test -count=1 ./...

## e2e: the end-to-end tests on a real node (the kubelet built from source,
## containerd and runc from Debian); needs root on Debian. The first run builds
## the kubelet and installs the packages. test/e2e holds what only a real node
## shows; then the whole-loop suite and the command-line tests run again, on
## the real node. One real node at a time: the packages run one after the
## other.
e2e:
	@hack/control-plane.sh kubelet >/dev/null
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test -tags e2e $(TEST_FLAGS) ./test/e2e/...
	SIDECARSET_NODES=real KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(TEST_FLAGS) -run TestKilledNodeRecovers ./internal/realnode/...
	SIDECARSET_NODES=real KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(TEST_FLAGS) ./test/integration/...
	SIDECARSET_NODES=real KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(TEST_FLAGS) ./internal/cli/...
	SIDECARSET_NODES=real KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(TEST_FLAGS) -run TestPlaygroundWithDemo ./internal/playground/...

## bench: the benchmarks; results go to bench/results/.
bench: control-plane
	@mkdir -p bench/results
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test -run '^$$' -bench . -benchmem -count=1 -timeout 60m ./... | tee bench/results/latest.txt

generate:
	$(CONTROLLER_GEN) object paths=./api/...

# Descriptions are left out of the CRD so that a client-side `kubectl apply`
# fits its last-applied annotation (256 KiB); the Go types document the fields.
# The Helm chart ships copies of the CRD and the RBAC roles.
manifests:
	$(CONTROLLER_GEN) crd:maxDescLen=0 paths=./api/... output:crd:artifacts:config=config/crd
	$(CONTROLLER_GEN) rbac:roleName=sidecarset-manager paths=./internal/manager/... output:rbac:artifacts:config=config/rbac
	cp config/crd/*.yaml charts/sidecarset/crds/
	cp config/rbac/role.yaml charts/sidecarset/files/role.yaml

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...

## verify: gofmt, go vet, go.mod tidy, and generated code and CRDs up to date.
verify:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/...
	$(GO) mod tidy -diff
	cd test/chart && $(GO) vet ./... && $(GO) mod tidy -diff
	hack/verify-generated.sh

## playground: the local environment and its demo; PLAYGROUND_FLAGS="--demo=false" skips the demo,
## PLAYGROUND_FLAGS="--node-kind=real" runs a real node (root; builds the kubelet first).
playground: control-plane
	$(if $(findstring --node-kind=real,$(PLAYGROUND_FLAGS)),@hack/control-plane.sh kubelet >/dev/null)
	$(GO) build -o bin/sidecarset-playground ./cmd/sidecarset-playground
	$(GO) build -o bin/kubectl-sidecarset ./cmd/kubectl-sidecarset
	ln -sf "$(ASSETS)/kubectl" bin/kubectl
	KUBEBUILDER_ASSETS="$(ASSETS)" bin/sidecarset-playground $(PLAYGROUND_FLAGS)

clean:
	rm -rf bin bench/results/latest.txt
