# Thin wrappers over npm scripts and the CLI; `make help` lists the targets.
IMAGE ?= sidecar-injector:0.1.0
OVERLAY ?= manifests/overlays/self-signed

.PHONY: help install build test run certs manifests deploy image bench soak clean

help:
	@echo "make install    npm ci"
	@echo "make build      compile TypeScript to dist/"
	@echo "make test       the whole test suite (what CI runs)"
	@echo "make run        serve the bundled templates locally with a throw-away certificate"
	@echo "make certs      write a CA, a serving certificate and the overlay $(OVERLAY)"
	@echo "make manifests  render the base and every overlay with kubectl kustomize"
	@echo "make deploy     make certs, then kubectl apply -k $(OVERLAY)"
	@echo "make image      docker build -t $(IMAGE) ."
	@echo "make bench      benchmarks (micro and HTTPS against the limit servers)"
	@echo "make soak       sustained load for 3 minutes, RSS sampled"

node_modules: package-lock.json
	npm ci --no-audit --no-fund
	@touch node_modules

install: node_modules

build: node_modules
	npm run build

test: node_modules
	npm test

run: node_modules
	npm start

certs: build
	node dist/src/cli/main.js certs --out $(OVERLAY)

manifests:
	kubectl kustomize manifests
	kubectl kustomize manifests/overlays/cert-manager

deploy: certs
	kubectl apply -k $(OVERLAY)

image:
	docker build -t $(IMAGE) .

bench: node_modules
	npm run bench

clean:
	rm -rf dist

soak: node_modules
	npm run soak
