# gazconsumer's build. Every target does its own set-up: `make test` and
# `make demo` work on a fresh machine with nothing installed by hand.

SHELL := /bin/bash
TOOLS := $(CURDIR)/.tools/bin
export PATH := $(TOOLS):$(PATH)

# Packages whose tests exercise concurrency, run again under the race detector.
RACE_PKGS := ./devstack/... ./recoverylog/... ./store/rocks/... ./runtime/...

.PHONY: all setup generate build test test-multihost test-image image race vet demo bench bench-go bench-consumers bench-recovery bench-rescale clean

all: build

## setup: install what is missing (apt packages, buf, protoc-gen-go, gazctl).
setup:
	@./scripts/setup.sh

## generate: regenerate every generated file (buf generate, offline; the
## example's journal and shard specs from its annotations), and
## scaffold the handlers and command of a new consumer of example/proto.
generate: setup
	buf generate
	go run ./cmd/gazconsumer specs --out example/specs example/proto

## build: build gazconsumer, protoc-gen-gazconsumer, the example's commands
## (ledger, leaderboard, bankctl) and gazctl into bin/.
build: setup
	go build -o bin/ ./cmd/... ./example/cmd/... go.gazette.dev/core/cmd/gazctl

vet: setup
	go vet ./...

## test: vet, test everything, then the concurrent packages again with -race;
## the benchmark module (bench/) is vetted, so that it keeps compiling.
test: setup
	go vet ./...
	cd bench && go vet ./...
	go test -timeout 20m ./...
	go test -race -timeout 20m $(RACE_PKGS)

## test-multihost: the example bank across hosts, each a network namespace
## (it needs root): etcd, three brokers and the members on hosts of their
## own, over mutual TLS with authorization, through a broker host going
## down, a member host cut off and members killed (example/multihost).
test-multihost: setup
	go test -tags multihost -count=1 -timeout 20m -v ./example/multihost/

## image: build deploy/Dockerfile with buildah, without a Docker engine or
## a registry: its bases are made from Debian packages (scripts/build-image.sh;
## IMAGE_FLAGS adds flags of it, e.g. IMAGE_FLAGS='-t my/ledger:v1'). It
## needs root.
image: setup
	./scripts/build-image.sh $(IMAGE_FLAGS)

## test-image: build the image (as image does) and run a member of the example
## from it against the development stack (deploy/image_test.go; needs root;
## the first build makes the bases and takes minutes; not part of test).
test-image: setup
	go test -tags image -count=1 -timeout 30m -v -run TestImageRunsAMember ./deploy/

## demo: the main job, the example bank, on the in-process stack: generates,
## builds, runs and checks it (see scripts/demo.sh).
demo: generate build
	@./scripts/demo.sh

## bench: every benchmark: the packages' Go benchmarks (bench-go), then
## gazconsumer against Gazette's own consumer and a raw read (bench-consumers).
bench: bench-go bench-consumers

## bench-go: the packages' Go benchmarks, printing their ratios.
bench-go: setup
	go test -run '^$$' -bench . -benchtime 1x ./...

## bench-consumers: gazconsumer against a consumer written on Gazette's own
## framework and against a raw read of the same journals: throughput,
## latency and recovery, side by side, every answer checked (module bench/,
## docs/benchmarks.md; half an hour; not part of test). BENCH_FLAGS adds flags of bench/cmd/bench,
## e.g. BENCH_FLAGS='-messages 100000 -state 64MiB -reps 1' for a quick look.
bench-consumers: setup
	cd bench && go build -o bin/ ./cmd/... && go build -tags gazconsumer_novtproto -o bin/summer-novt ./cmd/summer && bin/bench $(BENCH_FLAGS)

## bench-recovery: recovery of a shard with 1 GiB of live state, against its
## live bytes and an fsync'd write of them (a few minutes; not part of test).
bench-recovery: setup
	cd bench && go run ./cmd/recoverybench

## bench-rescale: gazconsumer rescale splitting the example ledger's 2 shards
## into 4 while it works through a backlog, against the goals of issue 27: the
## new shards' time to serve against the parent's recovery, the bytes each
## fork reads against the parent's live state, consumption during the split
## against before it; every run's answer checked with bankctl check (module
## bench/, bench/cmd/rescalebench, docs/benchmarks.md; several minutes; not
## part of test). RESCALE_FLAGS adds flags of it, e.g. RESCALE_FLAGS='-reps 1'.
bench-rescale: setup
	cd bench && go run ./cmd/rescalebench $(RESCALE_FLAGS)

clean:
	rm -rf bin .gazconsumer
