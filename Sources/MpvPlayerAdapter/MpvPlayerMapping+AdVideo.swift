import AdRuntime

/// The ad's video in the content's mpv (R8): its own state machine — loaded, started, progress,
/// paused by the viewer, ended — told as `AdPlayback`, never as an item of the player model.
extension MpvPlayerMapping {
    /// What happens to an ad's video played in the same mpv (R8): never an item.
    enum AdPlayback: Equatable {
        enum End: Equatable {
            /// Played to its end.
            case finished
            /// Something else stopped it (another file loaded, `stop`, `quit`).
            case stopped
            /// It could not be played: mpv's reason.
            case failed(String)
        }

        case started(entry: Int64)
        case progress(entry: Int64, position: Double, duration: Double)
        /// Paused (true) or resumed (false) by the viewer while it plays.
        case paused(entry: Int64, Bool)
        case ended(entry: Int64, End)
    }

    /// `entry` is an ad's video: it is never an item of the player model (R8).
    mutating func noteAdLoad(entry: Int64) { adEntries.insert(entry) }

    /// The ad's video was loaded and has not ended.
    func isAdPending(_ entry: Int64) -> Bool { adEntries.contains(entry) }

    /// The pause flag to write to mpv again now that the ad's video plays: the viewer's, given
    /// while it was opening, must not lose to the video's per-file `pause=no`.
    mutating func takeAdPauseToApply() -> Bool? {
        defer { adPauseToApply = nil }
        return adPauseToApply
    }

    /// Ad playback events since the last call.
    mutating func takeAdEvents() -> [AdPlayback] {
        defer { adEvents = [] }
        return adEvents
    }

    /// Handles `event` if it concerns an ad's video; false if it is the content's.
    mutating func applyAd(_ event: MpvEvent, _ query: Query) -> Bool {
        switch event {
        case .startFile(let entry) where adEntries.contains(entry):
            // The content (played to its end, or stopped) is gone from mpv; no item comes in —
            // unless a break holds it: then it stays in, held, until its file comes back.
            if holdAt == nil { leaveItem() }
            currentEntry = entry
            loaded = false
            started = false
            eof = nil
            endedItem = nil
            seek = nil
            adPlaying = entry
            adSettled = false
            adHeld = false
            adViewerPause = nil
            adDuration = nil
            // Not started yet: a linear ad starts — and is billed — at its first frame on the
            // output (its first PLAYBACK_RESTART), not at its file's load (issue 34, 16).
            return true
        case .endFile(let entry, let reason) where adEntries.contains(entry):
            adEntries.remove(entry)
            var told = false
            if adPlaying == entry {
                told = adHeld
                adPlaying = nil
                adHeld = false
                currentEntry = nil
            }
            if told { return true }   // its end was told when it reached it
            switch reason {
            case .eof: adEvents.append(.ended(entry: entry, .finished))
            case .error(let error): adEvents.append(.ended(entry: entry, .failed(error.message)))
            default: adEvents.append(.ended(entry: entry, .stopped))
            }
            return true
        default:
            break
        }
        guard let entry = adPlaying else { return false }
        if adHeld {
            // Ended, its last frame on screen: nothing more of it is told; mpv's flag is followed.
            if case .property(let id, _, let value) = event, Observed(rawValue: id) == .pause, let reported = value.flag {
                pause = resolvePause(reported, query)
            }
            return true
        }
        switch event {
        case .playbackRestart where !adSettled:
            // It plays: mpv was told `pause=no` for it (per-file), whatever the content's flag
            // was (keep-open-pause's own pause at the end included). From here on a change of
            // the flag is the viewer's — and so was a pause or play of ours while it opened:
            // that one holds (mpv is told it again) and a pause is the ad's first.
            adSettled = true
            adEvents.append(.started(entry: entry))
            if let wanted = adViewerPause {
                adViewerPause = nil
                adPauseToApply = wanted
                pause = wanted
                ownPause = wanted
                if wanted { adEvents.append(.paused(entry: entry, true)) }
            } else {
                pause = false
                ownPause = nil
            }
        case .property(let id, _, let value):
            guard let property = Observed(rawValue: id) else { return true }
            switch property {
            case .timePos:
                if let position = value.double, adSettled {
                    adEvents.append(.progress(entry: entry, position: max(0, position), duration: adDuration ?? 0))
                }
            case .duration:
                adDuration = value.double
            case .eofReached:
                // Played to its end (keep-open holds the last frame until the next file).
                if value.flag == true, adSettled {
                    adHeld = true
                    adEvents.append(.ended(entry: entry, .finished))
                }
            case .path, .loopFile:
                break
            case .pause:
                guard let reported = value.flag else { break }
                let paused = resolvePause(reported, query)
                if adSettled, paused != pause { adEvents.append(.paused(entry: entry, paused)) }
                pause = paused
            default:
                return false   // speed and sizes are the player's, whatever plays
            }
        default:
            break
        }
        return true
    }
}
