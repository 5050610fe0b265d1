# adplayerd — the two commands are `make run` and `make test`; each installs what it needs.
SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)

SWIFT ?= swift
SWIFT_FLAGS ?=

.PHONY: run test build deps media clean bench

run: deps media build
	.build/debug/adplayerd play --demo --ads media/catalog media/episode-1.mp4 media/episode-2.mp4

test: deps media
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --skip-build --disable-swift-testing $(SWIFT_FLAGS)

build: deps
	$(SWIFT) build $(SWIFT_FLAGS)

deps:
	@scripts/install-deps.sh
	@command -v $(SWIFT) >/dev/null || { echo "swift not found: install Swift 6 (https://swift.org/install) and put it on PATH" >&2; exit 1; }

media: deps
	@scripts/make-media.sh

bench: deps media
	$(SWIFT) build -c release --product adplayerd
	.build/release/adplayerd bench-latency --rounds 200 media/episode-long.mp4
	python3 scripts/bench.py 3

clean:
	rm -rf .build media
