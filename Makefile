# presence: see README.md. `make run` and `make test` are all a fresh clone needs.
GO      ?= go
NODES   ?= 1
DEMO    ?= 20
TIMING  ?= fast
WEBHOOK ?= 0
FUZZTIME ?=
BIN     := bin

.PHONY: all build run test centrifugo fuzz sim bench bench-cluster bench-store bench-storm bench-scale bench-micro bench-churn chaos chaos-nine proto tools lint verify docker docker-postgres compose-up compose-down clean

all: build

build:
	$(GO) build -o $(BIN)/ ./cmd/...

## run: a local 3-node cluster with demo devices (scripts/run-cluster.sh);
## WEBHOOK=1 adds a webhook receiver the nodes post every change to
run: build
	TIMING=$(TIMING) DEMO=$(DEMO) WEBHOOK=$(WEBHOOK) bash scripts/run-cluster.sh

## tools: what the tests need that Go does not bring (protoc, the
## PostgreSQL server binaries), idempotently
tools:
	@sh scripts/tools.sh

## centrifugo: the peer of make bench into bin/ (scripts/centrifugo.sh: a
## go install of a pinned version through the Go module proxy, minutes
## once; TestBenchSmoke runs it too where it is installed)
centrifugo:
	@BIN=$(BIN) sh scripts/centrifugo.sh || echo "centrifugo not installed: make bench runs without it" >&2

## test: vet, every test with -race (actor tests in virtual time, goroutine
## leak checks), a short fuzz run, and the E01 report; the browser tests'
## screenshots (the dashboard, the demo page) are kept in bin/screenshots
test: tools
	$(GO) vet ./...
	PRESENCE_SCREENSHOTS=$(CURDIR)/$(BIN)/screenshots $(GO) test -race -count=1 -timeout 10m ./...
	# two proto.actor members in one process race on grpc's global logger
	# (upstream), so these tests run without -race
	$(GO) test -count=1 -run 'TestProviderGrainsMoveOnCrash|TestProviderPlacesAFencedIncarnationOnceItServes|TestFencedIncarnationMovedFromItsServe|TestRemoteTraffic' ./cluster/
	# real faults on real processes, alone so the latencies measure the
	# service and not the parallel tests: every one within its bound
	# (gateway-crash, pause, kill-two, kill-two-at-once and its lease
	# variant, rolling with a 1 s debounce, restart-storm, and as root
	# partitions 2+1 and 2+2+1, each with both strategies, 2+2+1 with a
	# 1 s debounce), then a 25 s soak of kills, pauses, partitions and
	# restarts (TestRunSoak, about 40 s); TestLogExcerpt first, which
	# reads what a failed scenario prints
	$(GO) test -race -count=1 -tags chaos -run 'TestLogExcerpt|TestRunScenarios|TestRunScenarioUnderLoad|TestRunSoak' -v ./chaos/
	# on containers, where a Docker engine answers: pause, partition,
	# kill-two, kill-two-at-once-lease
	if docker info >/dev/null 2>&1; then $(MAKE) --no-print-directory docker && \
	  $(GO) test -race -count=1 -tags chaos -run TestRunDocker -v ./chaos/; \
	else echo "no Docker engine: the chaos docker backend is not exercised"; fi
	# deploy/compose.yaml brought up with PostgreSQL (presence-postgres:dev,
	# built by the test from the host's postgresql), a node killed, taken
	# down (where a Docker engine and docker-compose answer; presence:dev
	# was built above)
	if docker info >/dev/null 2>&1 && command -v docker-compose >/dev/null; then \
	  $(GO) test -race -count=1 -tags compose -run 'TestCompose|TestPostgresImage' -v ./deploy/; \
	else echo "no Docker engine or docker-compose: deploy/compose.yaml is not exercised"; fi
	# the Kubernetes manifests, decoded strictly (a module of its own)
	cd deploy/k8s && $(GO) test -count=1 ./
	$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME)
	$(GO) run ./cmd/presencectl sim e01

## fuzz: each fuzz target for a count of executions (about 8 s each on a
## 2-core machine), or for FUZZTIME (make fuzz FUZZTIME=5m for a long run).
## A count, not a duration: Go 1.26's fuzzing coordinator can fail a target
## with a bare "context deadline exceeded" when a duration runs out while a
## worker is mid-execution (go.dev/issue/75804, fixed in Go 1.27); a count
## has no deadline to race.
fuzztime = $(if $(FUZZTIME),$(FUZZTIME),$(1))
fuzz:
	$(GO) test -run '^$$' -fuzz '^FuzzLease$$' -fuzztime $(call fuzztime,100000x) ./core/
	$(GO) test -run '^$$' -fuzz '^FuzzSinkBatched$$' -fuzztime $(call fuzztime,50000x) ./core/
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeFrame$$' -fuzztime $(call fuzztime,40000x) ./gateway/
	$(GO) test -run '^$$' -fuzz '^FuzzMaskGuard$$' -fuzztime $(call fuzztime,30000x) ./gateway/
	$(GO) test -run '^$$' -fuzz '^FuzzHeartbeatFastPath$$' -fuzztime $(call fuzztime,40000x) ./internal/beatjson/
	$(GO) test -run '^$$' -fuzz '^FuzzAckFastPath$$' -fuzztime $(call fuzztime,40000x) ./internal/beatjson/
	$(GO) test -run '^$$' -fuzz '^FuzzHandshake$$' -fuzztime $(call fuzztime,25000x) ./gateway/
	$(GO) test -run '^$$' -fuzz '^FuzzAdminBodies$$' -fuzztime $(call fuzztime,25000x) ./admin/

## sim: the E01 experiments in virtual time, as JSON
sim:
	$(GO) run ./cmd/presencectl sim e01 --json

## bench: one presenced node side by side with the Redis-TTL design
## (redis-server + cmd/bench's peer) and with Centrifugo (bin/centrifugo,
## installed by make centrifugo; one node, memory engine) on N devices from load
## processes on 127.0.0.2.., RUNS runs each, presence's first run held
## HOLD; prints the table of BENCHMARKS.md, presence against each peer,
## with each target met or missed
## (make bench N=5000 RUNS=1 HOLD=0 for a quick one)
## (make bench BENCHFLAGS=--webhook: presence posts its webhooks to one
## endpoint, a receiver in the bench; BENCHFLAGS passes any bench run flag,
## e.g. --systems presence,centrifugo)
N    ?= 19000
RUNS ?= 3
HOLD ?= 5m
BENCHFLAGS ?=
bench: tools centrifugo
	$(GO) build -o $(BIN)/ ./cmd/presenced ./cmd/bench
	$(BIN)/bench run --n $(N) --runs $(RUNS) --hold $(HOLD) --bin $(BIN) $(BENCHFLAGS) | tee bench.out

## bench-cluster: one offline to 10,000 subscribers spread over 3 presenced
## nodes (beside it 3 peer processes on one redis-server): CN devices, SUBS
## users with two devices each on two nodes (a policy names at most 5,000
## contacts), CRUNS runs of CROUNDS offlines each (BENCHMARKS.md, "Issue 9's
## rows at scale")
CN      ?= 10000
SUBS    ?= 5000
CRUNS   ?= 3
CROUNDS ?= 3
bench-cluster: tools
	$(GO) build -o $(BIN)/ ./cmd/presenced ./cmd/bench
	$(BIN)/bench run --nodes 3 --devices 2 --n $(CN) --subs $(SUBS) --runs $(CRUNS) --rounds $(CROUNDS) --idle 30s --bin $(BIN) | tee bench-cluster.out

## bench-store: issue 9's store under load: SN devices connect to one node,
## heartbeat, then drop at once, on SQLite and on PostgreSQL (a server from
## the host's binaries, default settings); every write counted and looked
## up, RSS against the steady state (BENCHMARKS.md, "The store under mass
## rows at scale")
SN ?= 19000
bench-store: tools
	$(GO) build -o $(BIN)/ ./cmd/presenced ./cmd/bench
	$(BIN)/bench store --n $(SN) --runs $(RUNS) --bin $(BIN) | tee bench-store.out

## bench-storm: issue 25's login wave on NODES nodes (default 1; make
## bench-storm NODES=3 for the 3-node variant, the devices spread over
## them): SN devices, each user subscribed to 2 contacts in real time and
## 20 batched, half of them leaving for 3 s; RUNS runs, each tiered then
## realtime only (BENCHMARKS.md, "The login storm")
bench-storm: tools
	$(GO) build -o $(BIN)/ ./cmd/presenced ./cmd/bench
	$(BIN)/bench storm --n $(SN) --nodes $(NODES) --runs $(RUNS) --bin $(BIN) | tee bench-storm.out

## bench-scale: issue 30's costs that grow with the cluster: a fresh
## cluster of each of SIZES nodes, PER_NODE heartbeating devices per node,
## each node's gossip and actor-transport traffic over 30 s and the join's
## convergence (BENCHMARKS.md, "What grows with the cluster")
SIZES    ?= 3,5,9
PER_NODE ?= 1000
SRUNS    ?= 3
bench-scale: tools
	$(GO) build -o $(BIN)/ ./cmd/presenced ./cmd/bench
	$(BIN)/bench scale --sizes $(SIZES) --per-node $(PER_NODE) --runs $(SRUNS) --bin $(BIN) | tee bench-scale.out

## bench-micro: the Go micro-benchmarks, for benchstat
bench-micro:
	$(GO) test -run '^$$' -bench . -benchmem -count 10 ./... | tee bench-micro.out

## chaos: every scenario on a local 3-node cluster, 3 rounds each; reports
## in chaos-report/<scenario>/report.{json,html}; then (SCENARIO=all on
## processes) chaos-nine
## (make chaos BACKEND=docker: on containers of presence:dev, built first)
## (make chaos SCENARIO=gateway-crash LOAD=19000: LOAD background devices
## per node from load processes, heartbeating, LOAD_TIMING=fast or seed;
## docs/bounds.md "Under load")
## (churn, in every round: USERS distinct users, about ONLINE connected at
## once; see bench-churn)
SCENARIO ?= all
ROUNDS   ?= 3
DEVICES  ?= 30
BACKEND  ?= process
USERS    ?= 100000
ONLINE   ?= 1000
LOAD     ?= 0
LOAD_TIMING ?= fast
chaos:
	if [ "$(BACKEND)" = docker ]; then $(MAKE) --no-print-directory docker; fi
	$(GO) run ./cmd/chaos run --scenario $(SCENARIO) --nodes 3 --devices $(DEVICES) --rounds $(ROUNDS) --backend $(BACKEND) --users $(USERS) --online $(ONLINE) --load $(LOAD) --load-timing $(LOAD_TIMING) --report chaos-report
	if [ "$(SCENARIO)" = all ] && [ "$(BACKEND)" = process ]; then $(MAKE) --no-print-directory chaos-nine; fi

## chaos-nine: issue 30's scenarios on NINE nodes (process backend; the
## partitions as root), NINE_DEVICES devices, NINE_ROUNDS rounds each:
## kill one, kill three one after another, partitions 1+8, 4+5 and 3+3+3
## with both strategies, a rolling restart of all, a restart storm of the
## largest node; reports in chaos-report/nine/<run>/ (docs/bounds.md "The
## cluster's size", with how long it took).
NINE         ?= 9
NINE_DEVICES ?= 18
NINE_ROUNDS  ?= 1
nine = $(GO) run ./cmd/chaos run --nodes $(NINE) --devices $(NINE_DEVICES) --rounds $(NINE_ROUNDS) --report chaos-report/nine
chaos-nine:
	$(nine)/gateway-crash --scenario gateway-crash
	$(nine)/kill-seq --scenario kill-seq --kills 3
	$(nine)/kill-two-at-once --scenario kill-two-at-once
	$(nine)/rolling --scenario rolling
	$(nine)/restart-storm --scenario restart-storm --devices $$(( $(NINE_DEVICES) * 5 ))
	$(nine)/join --scenario join
	if [ "$$(id -u)" = 0 ]; then \
	  $(nine)/partition --scenario partition && \
	  for g in 4+5 3+3+3; do \
	    $(nine)/partition-$$g --scenario partition --groups $$g && \
	    $(nine)/partition-lease-$$g --scenario partition-lease --groups $$g || exit 1; \
	  done; \
	else echo "not root: the nine-node partitions are not run"; fi

## bench-churn: memory under churn (docs/bounds.md, "Memory under churn"):
## USERS distinct users connect in waves to a local 3-node cluster, about
## ONLINE at once, and leave; live actors and RSS against the devices
## online, and back to the baseline after idle; chaos-report/churn/report.html
bench-churn:
	$(GO) run ./cmd/chaos run --scenario churn --nodes 3 --rounds 1 --users $(USERS) --online $(ONLINE) --report chaos-report/churn

## proto: regenerate messages/*.pb.go
proto: tools
	sh scripts/protogen.sh

lint:
	$(GO) vet ./...
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { gofmt -l $$(git ls-files '*.go'); exit 1; }

## verify: formatting, go.mod and generated code leave no diff
verify: lint proto
	$(GO) mod tidy
	git diff --exit-code -- go.mod go.sum messages/

docker:
	CGO_ENABLED=0 GOOS=linux $(GO) build -trimpath -ldflags='-s -w' -o $(BIN)/linux/ ./cmd/...
	docker build -t presence:dev -f deploy/Dockerfile .

## docker-postgres: presence-postgres:dev, PostgreSQL FROM scratch from this
## host's Debian postgresql package (deploy/postgres/build.sh; no registry)
docker-postgres:
	sh deploy/postgres/build.sh

## compose-up: three nodes, PostgreSQL and demo devices (deploy/compose.yaml),
## secrets from deploy/.env (copy deploy/env.example); builds both images,
## waits until every node is ready. compose-down removes containers,
## network and volumes.
COMPOSE ?= docker-compose
COMPOSE_PROJECT ?= presence
compose-up: docker docker-postgres
	@test -f deploy/.env || { echo "deploy/.env is missing: cp deploy/env.example deploy/.env and set the secrets in it" >&2; exit 2; }
	$(COMPOSE) -p $(COMPOSE_PROJECT) -f deploy/compose.yaml up -d
	@for n in node1 node2 node3; do \
	  for i in $$(seq 90); do \
	    [ "$$(docker inspect -f '{{.State.Health.Status}}' $$($(COMPOSE) -p $(COMPOSE_PROJECT) -f deploy/compose.yaml ps -q $$n))" = healthy ] && break; \
	    [ $$i = 90 ] && { echo "$$n not ready after 3 min: $(COMPOSE) -p $(COMPOSE_PROJECT) -f deploy/compose.yaml logs $$n" >&2; exit 1; }; sleep 2; \
	  done; echo "$$n ready"; \
	done
	@echo "dashboard http://127.0.0.1:7700/#token=<PRESENCE_ADMIN_TOKEN> (and :7701, :7702); devices ws://127.0.0.1:7600/ws (and :7601, :7602)"

compose-down:
	$(COMPOSE) -p $(COMPOSE_PROJECT) -f deploy/compose.yaml down -v --remove-orphans

clean:
	rm -rf $(BIN) bench.out bench-cluster.out bench-store.out bench-micro.out
