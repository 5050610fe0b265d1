#!/usr/bin/env bash
# Installs the Debian packages adplayerd needs to build, test and run — only those missing.
# Uses sudo when not root. Safe to run again.
set -euo pipefail
packages=(
  libmpv-dev        # libmpv and its headers (CMpv); FFmpeg's -dev packages come with it (CFFmpeg)
  libsqlite3-dev    # the beacon outbox and the daemon's state (CSQLite)
  libcurl4-openssl-dev # the one bounded HTTP reader (CCurl): ad servers, creatives, beacons
  zlib1g-dev        # a PNG creative's image data checked to be all there (CFFmpeg)
  systemd           # systemd-analyze: the units in systemd/ are verified by the tests
  libsystemd-dev    # sd-bus: MPRIS2 media controls and logind's PrepareForSleep (CMpris)
  dbus-daemon       # the tests' private buses (dbus-daemon --session)
  dbus-bin          # dbus-send and dbus-monitor: a stand-in for logind, the signals tests watch
  playerctl         # the MPRIS tests drive adplayerd with the real playerctl
  ffmpeg            # sample media for the demo and the tests (lavfi)
  mpv               # bare mpv (the bench's and the tests' reference player)
  gcc               # `make bench` builds scripts/bench/bare_mpv.c, the bare libmpv client it compares with
  pkg-config        # libmpv's flags for that build (and for the system-library targets)
  strace            # `make bench` counts fsyncs (scripts/bench_state.py)
  python3           # test fixtures (throttled HTTP server)
  python3-dbus      # the MPRIS tests' stand-in for logind (it owns org.freedesktop.login1 on a private bus)
  python3-prometheus-client # the metrics tests parse metrics-file with Prometheus' own text parser
  xvfb              # pixel tests: a virtual X display for vo=x11
  libgl1-mesa-dri   # pixel tests: Mesa's software OpenGL for vo=gpu under Xvfb (screenshots with the ads)
  xdotool           # pixel tests: a key pressed in mpv's window
  x11-utils         # xprop: a test plays the window manager that minimizes mpv's window (R13)
  fonts-dejavu-core # text overlays (libass needs a font)
  tzdata            # display-hours in the box's time zone (timezone = Europe/Paris), DST included
  python3-junitparser # simulate: its report.xml read back by a JUnit parser (SimulateTests)
  libfaketime       # the schedule test: a daemon whose wall clock starts at a chosen instant (libfaketime preloaded)
  v4l-utils         # cec-ctl: the display put in standby and woken over HDMI-CEC (display-hours; the tests use a stand-in)
  chromium          # the web page's test: a real browser, headless (docs/web.md)
  chromium-driver   # ... driven through WebDriver
  python3-selenium  # ... by scripts/web_browser_check.py
  libmosquitto-dev  # adplayerd mqtt, the fleet bridge (CMqtt: libmosquitto, MQTT 5)
  mosquitto         # the fleet tests' broker
  mosquitto-clients # ... and the fleet's side (mosquitto_sub, mosquitto_pub, mosquitto_passwd)
  openssl           # the fleet tests' TLS certificates; a signed proof-of-play export verified as a buyer would
  libssl-dev        # libcrypto (CSign): the ledger's SHA-256, Ed25519 signatures of proof-of-play exports
  libxml2-dev       # the executables link Foundation statically: FoundationXML (VAST) needs libxml2 at link time
  libstdc++-12-dev  # ... and the static Swift runtime needs libstdc++ at link time
  libebur128-dev    # each creative's and episode's loudness, EBU R128 (CEbur128, R28)
  dpkg-dev          # make deb: dpkg-shlibdeps computes the package's Depends from the binaries
  binutils          # ... strip, as Debian ships binaries
  lintian           # ... and the package test checks it with Debian's lintian
  man-db            # the man pages (adplayerd manual) read by man, as the tests check them
  ca-certificates
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then exit 0; fi
echo "installing: ${missing[*]}" >&2
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
