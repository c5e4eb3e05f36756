# sidecarset: see README.md. The quick start is `make playground` and `make test`.

SHELL := /usr/bin/env bash
.SHELLFLAGS := -euo pipefail -c

GO ?= go
CONTROLLER_GEN := $(GO) tool -modfile=hack/tools/codegen/go.mod controller-gen
# golangci-lint, built from the version hack/tools/lint pins; it runs
# inside each module.
GOLANGCI_LINT := $(CURDIR)/bin/golangci-lint
# Every Go module of the repository, found by its go.mod. Of those holding
# Go code of their own (the others only pin tools), the ones under
# hack/tools build the control plane and are linted with
# hack/control-plane.sh's build settings, so that the packages it compiled
# (all of Kubernetes, for the kubelet) serve again.
MODULES := $(patsubst %/,%,$(dir $(shell git ls-files -co --exclude-standard -- ':(glob)**/go.mod')))
CODE_MODULES := $(foreach m,$(MODULES),$(if $(shell git ls-files -co --exclude-standard -- '$(m)/*.go' | head -n1),$(m)))
LINT_MODULES := $(filter-out hack/tools/%,$(CODE_MODULES))
LINT_TOOL_MODULES := $(filter hack/tools/%,$(CODE_MODULES))
# The control-plane binaries are built once per version, outside the work tree.
ASSETS = $(shell hack/control-plane.sh)
TEST_FLAGS ?= -race -count=1 -timeout 30m
# The real-node suites run without the race detector: make test runs the
# same code under it, and a real node tests what the kubelet does.
E2E_FLAGS ?= -count=1 -timeout 30m

.PHONY: all build test test-faults e2e unit bench fuzz verify verify-fmt verify-tidy verify-imports verify-generated lint shellcheck tidy generate manifests fmt vet playground control-plane image dist clean

all: build

build:
	$(GO) build ./...

control-plane:
	@hack/control-plane.sh >/dev/null

## test: unit and integration tests; integration runs a real kube-apiserver + etcd.
## The fault tests (test/faults) are left out: test-faults runs them alone.
## The integration suite, the longest, runs beside the other packages (which
## run one at a time): on simulated nodes, then again with simulated image
## pulls and container starts that take time. Its output follows theirs.
## It runs the manager of the last release beside this one's, built from
## this clone's history by hack/last-release.sh.
test: control-plane
	@log=$$(mktemp); \
	export SIDECARSET_LAST_RELEASE_MANAGER=$$(hack/last-release.sh); \
	( KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(TEST_FLAGS) ./test/integration/... && \
	  echo "integration suite again, with simulated image pulls and container starts that take time" && \
	  SIDECARSET_SIM_DELAY=400ms KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(TEST_FLAGS) ./test/integration/... ) >"$$log" 2>&1 & \
	pid=$$!; rc=0; \
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(TEST_FLAGS) -p 1 $$($(GO) list ./... | grep -v -e '/test/faults$$' -e '/test/integration$$') || rc=$$?; \
	wait $$pid || rc=$$?; \
	echo "integration suite:"; cat "$$log"; rm -f "$$log"; exit $$rc
	cd test/chart && $(GO) test -count=1 ./...
	cd test/krew && $(GO) test -count=1 ./...

## test-faults: rollouts through faults (the manager SIGKILLed, the
## apiserver's answers failing), alone on the machine, as their bounds need;
## a passing run writes its figures to FAULT_RESULTS (faults.md, and its
## keys merged into summary.json). SIDECARSET_FAULT_SEED repeats a run.
FAULT_RESULTS ?= $(CURDIR)/bench/results
test-faults: control-plane
	SIDECARSET_FAULT_RESULTS="$(FAULT_RESULTS)" KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(TEST_FLAGS) -v ./test/faults/

## e2e: the end-to-end tests on a real node (the kubelet built from source,
## containerd and runc from Debian); needs root on Debian. The first run builds
## the kubelet and installs the packages. test/e2e holds what only a real node
## shows, test/install installs the chart there with Helm; then the
## whole-loop suite and the command-line tests run again, on the real node.
## One real node at a time: the packages run one after the other, without
## the race detector (E2E_FLAGS). Tests of admission alone skip there.
e2e:
	@hack/control-plane.sh kubelet >/dev/null
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test -tags e2e $(E2E_FLAGS) ./test/e2e/...
	SIDECARSET_NODES=real KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(E2E_FLAGS) -run TestKilledNodeRecovers ./internal/realnode/...
	cd test/install && KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test -tags e2e $(E2E_FLAGS) ./...
	SIDECARSET_NODES=real KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(E2E_FLAGS) ./test/integration/...
	SIDECARSET_NODES=real KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(E2E_FLAGS) ./internal/cli/...
	SIDECARSET_NODES=real KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test $(E2E_FLAGS) -run TestPlaygroundWithDemo ./internal/playground/...

## bench: the benchmarks; results go to bench/results/. BENCH picks them by
## name (a -bench pattern, default all); BENCH_SCALE=small runs them smaller,
## in minutes (test/bench's admission and rollout benchmarks: about two each;
## its memory benchmark: under two; internal/inject's BenchmarkInjectPodMedian
## takes its medians of five repetitions at either scale, in under a minute).
BENCH ?= .
bench: control-plane
	@mkdir -p bench/results
	KUBEBUILDER_ASSETS="$(ASSETS)" $(GO) test -run '^$$' -bench '$(BENCH)' -benchmem -count=1 -timeout 60m ./... | tee bench/results/latest.txt

## fuzz: each fuzz target in turn for FUZZTIME (default 10m), with one
## worker. New inputs go to the corpus in the Go cache; a failing one is
## written to the package's testdata/fuzz, to commit with the fix. Plain
## `go test` (make test) replays the committed corpora.
FUZZTIME ?= 10m
FUZZ_TARGETS := internal/revision:FuzzDecode internal/validation:FuzzValidate internal/inject:FuzzInject internal/inject/resourceexpr:FuzzParse internal/webhook/fuzz:FuzzPodMutator
fuzz:
	@for t in $(FUZZ_TARGETS); do pkg="$${t%%:*}"; name="$${t##*:}"; \
		echo "fuzz $$name in ./$$pkg for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -parallel 1 "./$$pkg" || exit 1; \
	done

generate:
	$(CONTROLLER_GEN) object paths=./api/...

# The CRD keeps every field's description, so that `kubectl explain` shows
# the Go types' comments. A client-side `kubectl apply` stores the whole CRD
# as JSON in an annotation limited to 256 KiB; it takes about 220 KiB
# (test/crd applies it so and logs the size). The Helm chart ships copies of
# the CRD, the RBAC roles and the optional admission policy. The reference
# under docs/reference comes from the CRD and the CLI's commands.
manifests:
	$(CONTROLLER_GEN) crd paths=./api/... output:crd:artifacts:config=config/crd
	$(CONTROLLER_GEN) rbac:roleName=sidecarset-manager paths=./internal/manager output:rbac:artifacts:config=config/rbac
	$(CONTROLLER_GEN) rbac:roleName=sidecarset-manager-policy paths=./internal/manager/policyrbac output:rbac:artifacts:config=config/rbac/policy
	cp config/crd/*.yaml charts/sidecarset/crds/
	cp config/rbac/role.yaml charts/sidecarset/files/role.yaml
	cp config/rbac/policy/role.yaml charts/sidecarset/files/policy-role.yaml
	cp config/policy/restrict-sidecars.yaml charts/sidecarset/files/restrict-sidecars.yaml
	cd test/chart && $(GO) test -count=1 -run '^TestInstallManifest$$' ./... -update >/dev/null
	$(GO) run ./hack/gendocs docs/reference

fmt:
	gofmt -w $$(git ls-files '*.go')

vet:
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/e2e/...
	cd test/chart && $(GO) vet ./...
	cd test/krew && $(GO) vet ./...
	cd test/install && $(GO) vet -tags e2e ./...

## verify: gofmt, go vet, golangci-lint and shellcheck, go.mod tidy in every
## module, the pure packages' imports, and generated code and CRDs up to date.
verify: verify-fmt vet lint shellcheck verify-tidy verify-imports verify-generated

verify-fmt:
	@out=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## lint: golangci-lint (.golangci.yaml) over every module with Go code, the
## end-to-end tests included. Runs on one machine wait for each other.
lint:
	@$(GO) build -modfile=hack/tools/lint/go.mod -o $(GOLANGCI_LINT) github.com/golangci/golangci-lint/v2/cmd/golangci-lint
	@for m in $(LINT_MODULES); do echo "golangci-lint in $$m"; (cd $$m && $(GOLANGCI_LINT) run --allow-serial-runners ./...) || exit 1; done
	@for m in $(LINT_TOOL_MODULES); do echo "golangci-lint in $$m"; (cd $$m && CGO_ENABLED=0 GOFLAGS="$$($(GO) env GOFLAGS) -trimpath" $(GOLANGCI_LINT) run --allow-serial-runners ./...) || exit 1; done

## shellcheck: the scripts under hack/ and .ci/; installs shellcheck when missing.
shellcheck:
	@hack/shellcheck.sh

verify-tidy:
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy -diff) || { echo "$$m/go.mod is not tidy; run 'make tidy' and commit" >&2; exit 1; }; done

tidy:
	@for m in $(MODULES); do (cd $$m && $(GO) mod tidy); done

# The packages that decide without a cluster must not depend on a client.
verify-imports:
	$(GO) run ./hack/importguard

verify-generated:
	@hack/verify-generated.sh

## image: the sidecarset-manager image, built without Docker and without a base
## image, into IMAGE_TAR (default bin/image/sidecarset-manager.tar): an OCI layout
## for `ctr -n k8s.io images import` (checked by hand on the real node) and
## `kind load image-archive`, with a docker-save manifest.json for `docker load`
## (both only read back with go-containerregistry here). Named IMAGE_REPO:IMAGE_TAG
## (default ghcr.io/sidecarset/sidecarset-manager:<appVersion of the chart>, what
## the chart installs); prints "reference", "digest" and "archive" lines.
## IMAGE_PLATFORMS=linux/amd64,linux/arm64 adds platforms to the index;
## IMAGE_PUSH=registry/repo also pushes it; SOURCE_DATE_EPOCH (default: the
## commit time of HEAD) dates every file, so the same commit, Go version and CA
## bundle give the same digest. The revision label is HEAD, with "-dirty" when
## the work tree has changes.
IMAGE_TAR ?= bin/image/sidecarset-manager.tar
IMAGE_PLATFORMS ?= linux/amd64
image:
	$(GO) run ./hack/image -out="$(IMAGE_TAR)" -platforms="$(IMAGE_PLATFORMS)" $(if $(IMAGE_REPO),-repo="$(IMAGE_REPO)") $(if $(IMAGE_TAG),-tag="$(IMAGE_TAG)") $(if $(IMAGE_PUSH),-push="$(IMAGE_PUSH)")

## playground: the local environment and its demo; PLAYGROUND_FLAGS="--demo=false" skips the demo,
## PLAYGROUND_FLAGS="--node-kind=real" runs a real node (root; builds the kubelet first).
playground: control-plane
	$(if $(findstring --node-kind=real,$(PLAYGROUND_FLAGS)),@hack/control-plane.sh kubelet >/dev/null)
	$(GO) build -o bin/sidecarset-playground ./cmd/sidecarset-playground
	$(GO) build -o bin/kubectl-sidecarset ./cmd/kubectl-sidecarset
	ln -sf "$(ASSETS)/kubectl" bin/kubectl
	KUBEBUILDER_ASSETS="$(ASSETS)" bin/sidecarset-playground $(PLAYGROUND_FLAGS)

## dist: the release archives of kubectl-sidecarset, one per platform
## (linux, darwin, windows; amd64, arm64), their checksums.txt and the krew
## manifest with their sums, sidecarset.yaml, all in bin/dist/. VERSION
## defaults to the chart's appVersion; the archives' dates are the commit
## time of HEAD, so the same commit and Go version give the same sums.
## Cross-building six times takes several minutes on a small machine.
VERSION ?= $(shell sed -n 's/^appVersion: //p' charts/sidecarset/Chart.yaml)
dist:
	SOURCE_DATE_EPOCH="$$(git log -1 --format=%ct)" $(GO) run ./hack/dist -version "$(VERSION)" -out bin/dist

clean:
	rm -rf bin bench/results/latest.txt
