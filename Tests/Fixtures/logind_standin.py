#!/usr/bin/python3
"""A stand-in for systemd-logind on a private bus, for the sleep tests.

Usage: /usr/bin/python3 logind_standin.py ADDRESS
  Connects to the bus at ADDRESS, owns org.freedesktop.login1 as logind does, prints
  "ready". Then, for each line on stdin: "sleep" or "wake" emits
  org.freedesktop.login1.Manager.PrepareForSleep(true / false) from
  /org/freedesktop/login1, as logind does around a suspend, and prints "sent".
  Exits when stdin closes.

Debian's python3-dbus (the system Python's: run it with /usr/bin/python3).
"""
import sys

import dbus
import dbus.lowlevel

bus = dbus.bus.BusConnection(sys.argv[1])
if bus.request_name("org.freedesktop.login1") != dbus.bus.REQUEST_NAME_REPLY_PRIMARY_OWNER:
    sys.exit("cannot own org.freedesktop.login1")
print("ready", flush=True)
for line in sys.stdin:
    word = line.strip()
    if word not in ("sleep", "wake"):
        print("unknown: " + word, flush=True)
        continue
    signal = dbus.lowlevel.SignalMessage("/org/freedesktop/login1", "org.freedesktop.login1.Manager", "PrepareForSleep")
    signal.append(word == "sleep", signature="b")
    bus.send_message(signal)
    bus.flush()
    print("sent", flush=True)
