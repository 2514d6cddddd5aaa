# Thin wrappers over npm scripts; `make help` lists them.
.PHONY: help install build test run bench clean

help:
	@echo "make install  - npm ci"
	@echo "make build    - compile TypeScript to dist/"
	@echo "make test     - the whole test suite (what CI runs)"
	@echo "make run      - serve the bundled templates locally with a throw-away certificate"
	@echo "make bench    - benchmarks"

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

bench: node_modules
	npm run bench

clean:
	rm -rf dist
