# adplayerd — the two commands are `make run` and `make test`; each installs what it needs.
SHELL := /bin/bash
export PATH := /opt/swift/usr/bin:$(PATH)

SWIFT ?= swift
SWIFT_FLAGS ?=

.PHONY: run test stress tsan asan build deps media clean bench install install-files deb release-probe

run: deps media build
	scripts/demo.sh

# The release build of adplayerd-dev: the loop-affinity test runs its probes in the build that ships.
release-probe: deps
	$(SWIFT) build -c release --product adplayerd-dev $(SWIFT_FLAGS)

# `deb` first: the package test installs it (Tests/DaemonTests/PackageTests.swift).
test: deps media release-probe deb
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --skip-build --disable-swift-testing --skip StressTests $(SWIFT_FLAGS)

# The long part of the reliability suite (docs/reliability.md): kill -9 at random moments,
# 500 episodes back to back (about 8 minutes on the 2-core machine: 469 s in
# docs/reliability.md's figures), and a simulated month of a busy box by the release
# build's simulate (about 6 minutes more, its media made first), plus the builds.
stress: deps media
	$(SWIFT) build -c release --product adplayerd $(SWIFT_FLAGS)
	$(SWIFT) build --build-tests $(SWIFT_FLAGS)
	$(SWIFT) test --skip-build --disable-swift-testing --filter StressTests $(SWIFT_FLAGS)

# ThreadSanitizer over the whole suite, the daemons and tools the tests start included
# (each process writes its report to .build/tsan-logs/); fails on any warning (SPEC R18: one owner, few locks,
# all of a kind TSan sees). Slower than `make test`. Its own build folder, beside the debug build.
tsan: deps media release-probe deb
	ADPLAYERD_SHARED_SWIFT_RUNTIME=1 $(SWIFT) build --build-tests --sanitize=thread --scratch-path .build/tsan $(SWIFT_FLAGS)
	rm -rf .build/tsan-logs && mkdir -p .build/tsan-logs
	set -o pipefail; TSAN_OPTIONS="halt_on_error=0 report_signal_unsafe=0 log_path=$(CURDIR)/.build/tsan-logs/tsan" \
	  ADPLAYERD_SHARED_SWIFT_RUNTIME=1 $(SWIFT) test --skip-build --sanitize=thread --scratch-path .build/tsan --disable-swift-testing --skip StressTests $(SWIFT_FLAGS) 2>&1 | tee .build/tsan.log
	@n=$$(cat .build/tsan.log .build/tsan-logs/* 2>/dev/null | grep -c "WARNING: ThreadSanitizer" || true); \
	  if [ "$$n" != "0" ]; then echo "ThreadSanitizer: $$n warnings (see .build/tsan-logs/ and .build/tsan.log)" >&2; exit 1; fi; \
	  echo "ThreadSanitizer: 0 warnings"

# AddressSanitizer with its leak checker over the whole suite, the daemons and tools the
# tests start included (each process writes its report to .build/asan-logs/); fails on any
# report. Reports that are not leaks of ours are suppressed by name in asan.supp, each with
# its reason. Its own build folder, so that it does not disturb the debug build.
asan: deps media release-probe deb
	ADPLAYERD_SHARED_SWIFT_RUNTIME=1 $(SWIFT) build --build-tests --sanitize=address --scratch-path .build/asan $(SWIFT_FLAGS)
	rm -rf .build/asan-logs && mkdir -p .build/asan-logs
	set -o pipefail; \
	  ASAN_OPTIONS="detect_leaks=1:halt_on_error=0:detect_odr_violation=0:malloc_context_size=10:log_path=$(CURDIR)/.build/asan-logs/asan" \
	  LSAN_OPTIONS="suppressions=$(CURDIR)/asan.supp:print_suppressions=0" \
	  ADPLAYERD_SHARED_SWIFT_RUNTIME=1 $(SWIFT) test --skip-build --sanitize=address --scratch-path .build/asan --disable-swift-testing --skip StressTests $(SWIFT_FLAGS) 2>&1 | tee .build/asan.log
	@n=$$(cat .build/asan.log .build/asan-logs/* 2>/dev/null | grep -c "ERROR: AddressSanitizer\|ERROR: LeakSanitizer" || true); \
	  if [ "$$n" != "0" ]; then echo "AddressSanitizer: $$n reports (see .build/asan-logs/ and .build/asan.log)" >&2; exit 1; fi; \
	  echo "AddressSanitizer: 0 reports"

build: deps
	$(SWIFT) build $(SWIFT_FLAGS)

deps:
	@scripts/install-deps.sh
	@command -v $(SWIFT) >/dev/null || { echo "swift not found: install Swift 6 (https://swift.org/install) and put it on PATH" >&2; exit 1; }

media: deps
	@scripts/make-media.sh

bench: deps media
	$(SWIFT) build -c release --product adplayerd
	$(SWIFT) build -c release --product adplayerctl
	$(SWIFT) build -c release --product adplayerd-dev
	$(SWIFT) build -c release --product adplayerd-web
	$(SWIFT) build -c release --product adplayerd-mqtt
	.build/release/adplayerd-dev bench-latency --rounds 1000 media/episode-long.mp4
	@# R28: a 2-hour episode's loudness (made once: ffmpeg, 2.5 min), flat out and in the
	@# background, then the same latencies while the background measures it.
	test -s media/episode-2h.m4a || ffmpeg -v error -y -f lavfi -i "sine=frequency=440:sample_rate=48000:duration=7200" \
	  -f lavfi -i "anoisesrc=color=pink:sample_rate=48000:duration=7200:amplitude=0.05" \
	  -filter_complex "[0][1]amix=inputs=2,aformat=channel_layouts=stereo" -c:a aac -b:a 96k media/episode-2h.m4a
	.build/release/adplayerd-dev bench-loudness media/episode-2h.m4a
	.build/release/adplayerd-dev bench-latency --rounds 1000 --measure-loudness media/episode-2h.m4a media/episode-long.mp4
	.build/release/adplayerd-dev bench-catalog --slots 100000
	.build/release/adplayerd-dev bench-schedule
	.build/release/adplayerd-dev bench-ledger --plays 1000
	/usr/bin/python3 scripts/bench_control.py 50
	/usr/bin/python3 scripts/bench.py 3
	/usr/bin/python3 scripts/bench_events.py 200 1 16 63
	/usr/bin/python3 scripts/bench_state.py 60
	/usr/bin/python3 scripts/bench_slowdisk.py 30
	/usr/bin/python3 scripts/bench_web.py 50
	/usr/bin/python3 scripts/month_scenario.py bench 1 30
	/usr/bin/python3 scripts/bench_mqtt.py 100
	/usr/bin/python3 scripts/bench_evidence.py 20
	/usr/bin/python3 scripts/bench_transitions.py 5

# The release binaries, the systemd units (system and user), the man pages and adplayerctl's
# bash completion (made by `adplayerd manual` from the command table and the configuration's
# keys), the documentation and (if there is none yet) /etc/adplayerd.conf from the example.
# DESTDIR stages it elsewhere; the units name the programs under PREFIX. The system unit runs
# as the user adplayerd: README.md, "Installing" (the package makes it: `make deb`).
PREFIX ?= /usr/local
SYSTEM_UNIT_DIR ?= /etc/systemd/system
USER_UNIT_DIR ?= /etc/systemd/user
RELEASE := .build/release
PROGRAMS := adplayerd adplayerctl adplayerd-web adplayerd-mqtt
install: deps
	for program in $(PROGRAMS); do $(SWIFT) build -c release --product $$program $(SWIFT_FLAGS) || exit 1; done
	$(MAKE) --no-print-directory install-files

# What `install` installs, from the release build as it is (`install` and `deb` build it first).
install-files:
	for program in $(PROGRAMS); do install -D -m 0755 $(RELEASE)/$$program $(DESTDIR)$(PREFIX)/bin/$$program || exit 1; done
	for unit in adplayerd.service adplayerd-web.socket adplayerd-web.service adplayerd-mqtt.service; do \
	  install -d $(DESTDIR)$(SYSTEM_UNIT_DIR) $(DESTDIR)$(USER_UNIT_DIR) && \
	  sed 's|/usr/local/|$(PREFIX)/|g' systemd/system/$$unit > $(DESTDIR)$(SYSTEM_UNIT_DIR)/$$unit && \
	  sed 's|/usr/local/|$(PREFIX)/|g' systemd/user/$$unit > $(DESTDIR)$(USER_UNIT_DIR)/$$unit && \
	  chmod 0644 $(DESTDIR)$(SYSTEM_UNIT_DIR)/$$unit $(DESTDIR)$(USER_UNIT_DIR)/$$unit || exit 1; done
	for page in adplayerd.8 adplayerd.conf.5 adplayerctl.1; do \
	  install -d $(DESTDIR)$(PREFIX)/share/man/man$${page##*.} && \
	  $(RELEASE)/adplayerd manual $$page --docs docs > $(DESTDIR)$(PREFIX)/share/man/man$${page##*.}/$$page || exit 1; done
	for program in adplayerd-web adplayerd-mqtt; do \
	  echo ".so man8/adplayerd.8" > $(DESTDIR)$(PREFIX)/share/man/man8/$$program.8 || exit 1; done
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	$(RELEASE)/adplayerd manual adplayerctl.bash > $(DESTDIR)$(PREFIX)/share/bash-completion/completions/adplayerctl
	install -d $(DESTDIR)$(PREFIX)/share/doc/adplayerd
	install -m 0644 README.md docs/*.md docs/*.png docs/adplayerd.conf.example $(DESTDIR)$(PREFIX)/share/doc/adplayerd/
	@if [ -e $(DESTDIR)/etc/adplayerd.conf ]; then echo "kept $(DESTDIR)/etc/adplayerd.conf"; \
	  else install -D -m 0644 docs/adplayerd.conf.example $(DESTDIR)/etc/adplayerd.conf; fi

# The Debian package, adplayerd_<version>_<arch>.deb, here (scripts/make-deb.sh says how).
deb: deps
	for program in $(PROGRAMS); do $(SWIFT) build -c release --product $$program $(SWIFT_FLAGS) || exit 1; done
	scripts/make-deb.sh

clean:
	rm -rf .build media
