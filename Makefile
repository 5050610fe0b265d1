# adplayerd — the two commands are `make run` and `make test`; each installs what it needs.
SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)

SWIFT ?= swift
SWIFT_FLAGS ?=

.PHONY: run test stress tsan asan build deps media clean bench

run: deps media build
	scripts/demo.sh

test: deps media
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --skip-build --disable-swift-testing --skip StressTests $(SWIFT_FLAGS)

# The long part of the reliability suite (docs/reliability.md): kill -9 at random moments,
# 500 episodes back to back. About 15 minutes.
stress: deps media
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --skip-build --disable-swift-testing --filter StressTests $(SWIFT_FLAGS)

# ThreadSanitizer over the whole suite; fails on any warning (SPEC R18: one owner, few locks,
# all of a kind TSan sees). Slower than `make test`.
tsan: deps media
	$(SWIFT) build --build-tests --sanitize=thread $(SWIFT_FLAGS)
	set -o pipefail; TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0" \
	  $(SWIFT) test --skip-build --sanitize=thread --disable-swift-testing $(SWIFT_FLAGS) 2>&1 | tee .build/tsan.log
	@n=$$(grep -c "WARNING: ThreadSanitizer" .build/tsan.log || true); \
	  if [ "$$n" != "0" ]; then echo "ThreadSanitizer: $$n warnings (see .build/tsan.log)" >&2; exit 1; fi; \
	  echo "ThreadSanitizer: 0 warnings"

build: deps
	$(SWIFT) build $(SWIFT_FLAGS)

deps:
	@scripts/install-deps.sh
	@command -v $(SWIFT) >/dev/null || { echo "swift not found: install Swift 6 (https://swift.org/install) and put it on PATH" >&2; exit 1; }

media: deps
	@scripts/make-media.sh

bench: deps media
	$(SWIFT) build -c release --product adplayerd
	.build/release/adplayerd bench-latency --rounds 1000 media/episode-long.mp4
	python3 scripts/bench.py 3

clean:
	rm -rf .build media
