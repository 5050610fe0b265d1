import AdPlayerDaemon
import AdRuntime
import AdTestSupport
import ControlProtocol
import Foundation
import XCTest

/// MPRIS in process, on a private session bus: the bus thread never waits on the player's loop.
final class DesktopServiceTests: XCTestCase {
    /// While the loop is busy, a `Pause` call is taken (its answer waits for the loop, on
    /// sd-bus's asynchronous reply) and property reads — `PlaybackStatus`, `Position` — are
    /// answered at once from what the loop handed over last. Once the loop turns, the pause
    /// runs and the call is answered.
    func testTheBusThreadNeverWaitsOnTheLoop() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        setenv("DBUS_SESSION_BUS_ADDRESS", bus.address, 1)
        setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.address, 1)   // logind's signals: none come on this bus
        defer { unsetenv("DBUS_SESSION_BUS_ADDRESS"); unsetenv("DBUS_SYSTEM_BUS_ADDRESS") }
        let h = try ControllerHarness(source: nil)
        let desktop = try DesktopService(mpris: true, loop: h.loop, controller: h.controller, log: h.log)
        desktop.start()
        defer { desktop.stop() }
        h.onLoop {
            h.controller.onDesktopChange = { state, seekedTo in desktop.update(state, seekedTo: seekedTo) }
        }
        h.start()
        _ = try h.onLoop { try h.controller.enqueue([QueueEntry(path: "/lib/ep.mp4")]) }
        h.advance(3)
        h.onLoop { desktop.update(h.controller.desktopState(), seekedTo: nil) }
        XCTAssertEqual(try bus.playerProperty("PlaybackStatus"), "Playing")

        // The loop is busy: another thread runs it and waits.
        let gate = Handover<Bool>(), busy = Handover<Bool>()
        let holder = Workers(name: "test-loop")
        holder.execute { h.loop.execute { busy.fulfil(true); _ = gate.wait(timeout: 60) } }
        XCTAssertEqual(busy.wait(timeout: 10), true)
        let paused = Handover<Int32>()
        let caller = Workers(name: "test-pause")
        caller.execute { paused.fulfil((try? bus.playerctl("pause").status) ?? -1) }
        // Answered while the loop is busy (the bus thread did not wait for it) and before the pause ran.
        XCTAssertEqual(try bus.playerProperty("PlaybackStatus"), "Playing")
        let position = try bus.playerProperty("Position")
        // From the copy, extrapolated at the rate since it was handed over (3 s of content then).
        let microseconds = Double(position.replacingOccurrences(of: "int64", with: "").trimmingCharacters(in: .whitespaces)) ?? -1
        XCTAssertTrue(microseconds >= 3e6 && microseconds < 3e6 + 30e6, "Position answered from the copy: \(position)")
        XCTAssertNil(paused.current, "the Pause call is answered once the loop has run it, not before")
        gate.fulfil(true)
        XCTAssertEqual(paused.wait(timeout: 30), 0)
        XCTAssertFalse(h.player.snapshot().playing, "the pause ran on the loop")
        XCTAssertTrue(waitUntil { (try? bus.playerProperty("PlaybackStatus")) == "Paused" })
        XCTAssertEqual(h.offLoop.take(), [])
    }

    /// A session bus that stops answering (SIGSTOP) holds up the bus thread, never the loop:
    /// what waits for it is coalesced — one set of changed properties and the last Seeked —
    /// not a list that grows with every change and is walked on the loop. Once the bus answers
    /// again, the backlog goes out.
    func testAHungBusHoldsABoundedBacklog() throws {
        let bus = try PrivateBus()
        defer { bus.stop() }
        setenv("DBUS_SESSION_BUS_ADDRESS", bus.address, 1)
        setenv("DBUS_SYSTEM_BUS_ADDRESS", bus.address, 1)
        defer { unsetenv("DBUS_SESSION_BUS_ADDRESS"); unsetenv("DBUS_SYSTEM_BUS_ADDRESS") }
        let h = try ControllerHarness(source: nil)
        let desktop = try DesktopService(mpris: true, loop: h.loop, controller: h.controller, log: h.log)
        desktop.start()
        defer { desktop.stop() }
        kill(bus.pid, SIGSTOP)
        var resumed = false
        defer { if !resumed { kill(bus.pid, SIGCONT) } }
        var most = 0
        h.onLoop {
            var state = h.controller.desktopState()
            for i in 0..<20_000 {
                state.rate = i % 2 == 0 ? 2 : 1
                state.status = i % 3 == 0 ? .paused : .playing
                desktop.update(state, seekedTo: Double(i))
                most = max(most, desktop.waitingForTheBus)
            }
        }
        XCTAssertLessThanOrEqual(most, 2, "one set of changed properties and the last Seeked")
        kill(bus.pid, SIGCONT)
        resumed = true
        XCTAssertTrue(waitUntil(timeout: 30) { desktop.waitingForTheBus == 0 }, "the backlog goes out once the bus answers")
        XCTAssertEqual(try bus.playerProperty("Rate"), "double 1")
        XCTAssertEqual(h.offLoop.take(), [])
    }
}
