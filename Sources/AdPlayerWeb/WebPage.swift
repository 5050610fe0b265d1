/// The operator's page: one HTML file, its script and its style, served by `adplayerd web`
/// itself (no framework, nothing from elsewhere: it works on a box with no internet, under
/// `Content-Security-Policy: default-src 'self'` — no inline script or style). Every live
/// value is marked `data-field="NAME"`, every button `data-action="NAME"` (docs/web.md), so
/// tests and anyone's monitoring find them.
enum WebPage {
    static func html(banner: String?) -> String {
        let bannerHTML = banner.map { "<p class=\"banner\" data-field=\"banner\">\(escape($0))</p>" } ?? ""
        return """
        <!doctype html>
        <html lang="en">
        <head>
        <meta charset="utf-8">
        <meta name="viewport" content="width=device-width, initial-scale=1">
        <title>adplayerd</title>
        <link rel="stylesheet" href="/app.css">
        <script src="/app.js" defer></script>
        </head>
        <body>
        <header>
          <h1>adplayerd <span data-field="hostname">…</span></h1>
          <span class="pill" data-field="health">…</span>
          <span class="pill" data-field="daemon">connecting</span>
        </header>
        \(bannerHTML)
        <main>
        <section class="card">
          <h2>Now</h2>
          <dl>
            <dt>State</dt><dd data-field="state">…</dd>
            <dt>Episode</dt><dd data-field="item">…</dd>
            <dt>Position</dt><dd data-field="position">…</dd>
            <dt>Ad on screen</dt><dd data-field="ad">…</dd>
            <dt>Volume</dt><dd data-field="volume">…</dd>
            <dt>Queue</dt><dd data-field="queue-length">…</dd>
            <dt>Repeat</dt><dd data-field="repeat">…</dd>
            <dt>Schedule</dt><dd data-field="schedule">…</dd>
          </dl>
          <ul class="takeovers" data-field="takeovers"></ul>
          <div class="buttons">
            <button data-action="play">Play</button>
            <button data-action="pause">Pause</button>
            <button data-action="previous">Previous</button>
            <button data-action="next">Next</button>
            <button data-action="volume-down">Volume −</button>
            <button data-action="volume-up">Volume +</button>
            <button data-action="mute">Mute</button>
            <button data-action="skip">Skip ad</button>
          </div>
          <p class="message" data-field="message" role="status"></p>
        </section>
        <section class="card">
          <h2>Screen</h2>
          <img data-field="screenshot" alt="the output, when a screenshot is taken">
          <p class="note" data-field="screenshot-note"></p>
          <div class="buttons">
            <button data-action="screenshot">Screenshot</button>
            <button data-action="identify">Identify this screen</button>
            <button data-action="reload">Reload configuration</button>
          </div>
        </section>
        <section class="card">
          <h2>Health</h2>
          <ul class="checks" data-field="checks"></ul>
        </section>
        <section class="card">
          <h2>Output</h2>
          <dl>
            <dt>Video output</dt><dd data-field="vo">…</dd>
            <dt>Size</dt><dd data-field="output-size">…</dd>
            <dt>Hardware decoding</dt><dd data-field="hwdec">…</dd>
            <dt>Frames dropped</dt><dd data-field="dropped">…</dd>
            <dt>Frame rate</dt><dd data-field="fps">…</dd>
          </dl>
        </section>
        <section class="card">
          <h2>Box</h2>
          <dl>
            <dt>Box id</dt><dd data-field="box-id">…</dd>
            <dt>Version</dt><dd data-field="version">…</dd>
            <dt>Addresses</dt><dd data-field="addresses">…</dd>
            <dt>Up</dt><dd data-field="uptime">…</dd>
            <dt>Clock</dt><dd data-field="clock">…</dd>
          </dl>
        </section>
        <section class="card wide">
          <h2>Proof of play <a href="/api/plays.csv">CSV</a></h2>
          <table>
            <thead><tr><th>#</th><th>Started</th><th>Kind</th><th>Ad</th><th>Episode</th><th>Seconds</th><th>Ended</th><th>Viewable</th><th>Display</th><th>Loudness</th></tr></thead>
            <tbody data-field="plays"></tbody>
          </table>
        </section>
        <section class="card wide">
          <h2>Events</h2>
          <ol class="events" data-field="events"></ol>
        </section>
        <section class="card wide">
          <h2>Log <button data-action="logs">Refresh</button></h2>
          <pre data-field="logs"></pre>
        </section>
        </main>
        </body>
        </html>

        """
    }

    static func escape(_ text: String) -> String {
        text.replacingAll("&", with: "&amp;").replacingAll("<", with: "&lt;")
            .replacingAll(">", with: "&gt;").replacingAll("\"", with: "&quot;")
    }

    static let style = """
        :root { color-scheme: dark; --bg: #111418; --card: #1b2027; --text: #e6e9ee; --dim: #98a2b3; --ok: #2e9e5b; --warn: #c98a1b; --bad: #c9372c; }
        * { box-sizing: border-box; }
        body { margin: 0; font: 15px/1.4 system-ui, sans-serif; background: var(--bg); color: var(--text); }
        header { display: flex; flex-wrap: wrap; gap: .5rem; align-items: center; padding: .75rem 1rem; background: var(--card); }
        h1 { font-size: 1.2rem; margin: 0 auto 0 0; }
        h2 { font-size: 1rem; margin: 0 0 .5rem; color: var(--dim); }
        main { display: grid; grid-template-columns: repeat(auto-fit, minmax(300px, 1fr)); gap: 1rem; padding: 1rem; }
        .card { background: var(--card); border-radius: 8px; padding: 1rem; min-width: 0; }
        .wide { grid-column: 1 / -1; }
        dl { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; margin: 0; }
        dt { color: var(--dim); }
        dd { margin: 0; overflow-wrap: anywhere; }
        .buttons { display: flex; flex-wrap: wrap; gap: .5rem; margin-top: .75rem; }
        button { font: inherit; padding: .5rem .8rem; border-radius: 6px; border: 1px solid #3a4350; background: #262d36; color: var(--text); min-height: 44px; }
        button:active { background: #33404d; }
        .pill { padding: .15rem .6rem; border-radius: 999px; background: #333; font-size: .85rem; }
        .ok { background: var(--ok); } .degraded { background: var(--warn); } .failing { background: var(--bad); }
        .banner { margin: 0; padding: .5rem 1rem; background: #4a3a10; }
        .message { min-height: 1.4em; color: var(--dim); }
        .checks { list-style: none; padding: 0; margin: 0; }
        .checks li { padding: .2rem 0; }
        .checks .status { display: inline-block; min-width: 5.5rem; }
        img { max-width: 100%; background: #000; display: block; }
        img:not([src]) { display: none; }
        table { width: 100%; border-collapse: collapse; font-size: .9rem; }
        th, td { text-align: left; padding: .25rem .4rem; border-bottom: 1px solid #2a313a; }
        .wide { overflow-x: auto; }
        .events { margin: 0; padding-left: 1.5rem; font-family: ui-monospace, monospace; font-size: .85rem; max-height: 16rem; overflow-y: auto; }
        pre { white-space: pre-wrap; overflow-wrap: anywhere; font-size: .8rem; max-height: 20rem; overflow-y: auto; margin: 0; }
        .note { color: var(--dim); font-size: .85rem; }
        a { color: #7fb3ff; }

        """

    static let script = #"""
        'use strict';
        // adplayerd's page: status through Server-Sent Events (/events), actions through
        // POST /api/command. Values are written as text only (textContent), never as HTML.
        const field = (name) => document.querySelector('[data-field="' + name + '"]');
        const set = (name, text) => { const el = field(name); if (el) el.textContent = text; };
        let status = null;
        let statusAt = 0;

        function seconds(value) {
          if (typeof value !== 'number' || !isFinite(value)) return '–';
          const s = Math.max(0, Math.floor(value));
          const h = Math.floor(s / 3600), m = Math.floor(s / 60) % 60, r = s % 60;
          return (h ? h + ':' + String(m).padStart(2, '0') : m) + ':' + String(r).padStart(2, '0');
        }

        function stateOf(s) {
          if (!s.item) return s.queue_length ? 'stopped' : 'idle';
          return s.playing ? 'playing' : 'paused';
        }

        function renderStatus(s) {
          status = s;
          statusAt = performance.now();
          set('state', stateOf(s));
          set('item', s.item ? (s.item.content_id + ' — ' + s.item.path) : 'nothing');
          set('ad', (s.ad ? (s.ad.kind + ' ' + s.ad.ad_id) : 'none') + (s.break ? ' (a ' + s.break.kind + ' break)' : ''));
          set('volume', Math.round(s.volume) + ' %' + (s.mute ? ' (muted)' : ''));
          set('queue-length', String(s.queue_length) + (s.current !== null && s.current !== undefined ? ' (playing #' + (s.current + 1) + ')' : ''));
          set('repeat', s.repeat + (s.shuffle ? ', shuffle' : '') + (s.loop ? ', loop' : ''));
          // What the schedule plays and why, its next change; takeovers, audited (who, when, what, until).
          const sc = s.schedule;
          set('schedule', sc ? (sc.rule.kind + ' ' + sc.rule.id + ': ' + sc.rule.why + (sc.next_change ? '; next change ' + sc.next_change : '')
                                + (sc.override_until ? '; a person\'s commands until ' + sc.override_until : '')) : 'none');
          const list = field('takeovers');
          list.replaceChildren();
          for (const a of ((sc && sc.audit) || []).slice(-10).reverse()) {
            const li = document.createElement('li');
            li.textContent = a.at + ': takeover of ' + a.target + ' ' + a.event + ' by ' + a.by + (a.until ? ' (until ' + a.until + ')' : '');
            list.append(li);
          }
          renderPosition();
          const o = s.output || {};
          set('vo', o.vo || 'none');
          set('output-size', o.width && o.height ? o.width + '×' + o.height : '–');
          set('hwdec', (!o.hwdec ? '–' : o.hwdec === 'no' ? 'not asked for' : 'asked for (' + o.hwdec + ')') + ', ' +
                       (!o.hwdec_current ? '–' : o.hwdec_current === 'no' ? 'not in use' : 'in use (' + o.hwdec_current + ')'));
          const d = o.frames_dropped || {};
          set('dropped', (d.decoder ?? '–') + ' by the decoder, ' + (d.output ?? '–') + ' by the output');
          set('fps', o.fps ? String(o.fps) : '–');
          if (s.box) {
            set('hostname', s.box.hostname);
            set('box-id', s.box.box_id);
            set('version', s.box.version);
            set('addresses', (s.box.addresses || []).join(', ') || 'none');
            set('uptime', typeof s.box.uptime === 'number' ? seconds(s.box.uptime) : '–');
            set('clock', s.box.time + (s.box.clock_synchronized ? ' (synchronised)' : ' (not synchronised by NTP)'));
          }
        }

        function renderPosition() {
          if (!status) return;
          let position = status.position;
          if (status.playing && status.rate) position += (performance.now() - statusAt) / 1000 * status.rate;
          set('position', seconds(position));
        }

        function renderHealth(h) {
          const el = field('health');
          el.textContent = h.status;
          el.className = 'pill ' + h.status;
          const list = field('checks');
          list.replaceChildren();
          for (const c of h.checks || []) {
            const li = document.createElement('li');
            const s = document.createElement('span');
            s.className = 'status pill ' + c.status;
            s.textContent = c.status;
            li.append(s, ' ' + c.name + ': ' + c.reason);
            list.append(li);
          }
        }

        function loudnessText(l) {
          if (!l) return '–';
          const lu = v => (v == null ? '?' : v.toFixed(1)) + ' LUFS';
          const said = 'ad ' + lu(l.ad_lufs);
          if (l.target_lufs == null) return said + ', as mastered';
          const to = ' → ' + lu(l.target_lufs) + (l.content_lufs == null ? ' (fixed target)' : ' (the episode)');
          return said + to + (l.gain_db == null ? ', normalised as it played' : ', gain ' + (l.gain_db > 0 ? '+' : '') + l.gain_db.toFixed(1) + ' dB');
        }

        function renderPlays(plays) {
          const body = field('plays');
          body.replaceChildren();
          for (const p of plays.slice().reverse()) {
            const tr = document.createElement('tr');
            for (const v of [p.row, p.started, p.kind, p.ad_id, p.content_id, p.seconds ?? '–', p.reason ?? 'showing', p.viewable ?? '–']) {
              const td = document.createElement('td');
              td.textContent = String(v);
              tr.append(td);
            }
            // What the screen showed: the verdict, each check with its time on hover.
            const shown = document.createElement('td');
            shown.className = 'display';
            shown.textContent = (p.display ?? '–') + (p.display_evidence?.reason ? ': ' + p.display_evidence.reason : '');
            shown.title = (p.display_evidence?.checks ?? []).map(c => c.what + ' ' + c.said + ' at ' + c.at).join('\n');
            tr.append(shown);
            // How loud it played (R28): the ad as measured, the level aimed at, the gain.
            const level = document.createElement('td');
            level.className = 'loudness';
            level.textContent = loudnessText(p.loudness);
            tr.append(level);
            body.append(tr);
          }
        }

        function addEvent(e) {
          const list = field('events');
          const li = document.createElement('li');
          const detail = Object.assign({}, e);
          delete detail.event;
          li.textContent = new Date().toLocaleTimeString() + ' ' + e.event + ' ' + JSON.stringify(detail);
          list.prepend(li);
          while (list.children.length > 50) list.lastChild.remove();
        }

        // What a protocol event says at once (the status snapshot that follows confirms it).
        function applyEvent(e) {
          addEvent(e);
          if (!status) return;
          switch (e.event) {
            case 'player.paused': status.playing = false; status.position = e.position ?? status.position; statusAt = performance.now(); set('state', 'paused'); break;
            case 'player.playing': status.playing = true; status.rate = e.rate ?? 1; status.position = e.position ?? status.position; statusAt = performance.now(); set('state', 'playing'); break;
            case 'ad.started': set('ad', e.kind + ' ' + (e.ad_id || '')); break;
            case 'ad.ended': set('ad', 'none'); loadPlays(); break;
          }
        }

        async function get(path) {
          const r = await fetch(path, { cache: 'no-store', credentials: 'same-origin' });
          if (!r.ok) throw new Error(r.status + ' ' + ((await r.json().catch(() => ({}))).error?.message || r.statusText));
          return r.json();
        }

        async function command(cmd, args) {
          const body = JSON.stringify(args ? { cmd, args } : { cmd });
          const r = await fetch('/api/command', { method: 'POST', headers: { 'Content-Type': 'application/json' }, body, credentials: 'same-origin' });
          const reply = await r.json().catch(() => ({}));
          if (!r.ok) throw new Error(reply.error?.message || (r.status + ' ' + r.statusText));
          return reply.result;
        }

        async function loadPlays() { try { renderPlays((await get('/api/plays?newest=1&limit=20')).plays || []); } catch (e) { /* shown by the health */ } }
        async function loadLogs() { try { set('logs', ((await get('/api/logs?lines=60')).lines || []).map(l => l.time + ' ' + l.level + ': ' + l.text).join('\n')); } catch (e) { set('logs', String(e.message)); } }

        const actions = {
          play: () => command('play'),
          pause: () => command('pause'),
          next: () => command('next'),
          previous: () => command('previous'),
          'volume-down': () => command('volume', { by: -5 }),
          'volume-up': () => command('volume', { by: 5 }),
          mute: () => command('mute'),
          skip: async () => { await command('skip'); return 'the ad was skipped'; },
          identify: async () => { const r = await command('identify', { seconds: 30 }); return 'the screen shows code ' + r.code + ' for 30 s'; },
          reload: async () => { await command('reload'); return 'the configuration is read again'; },
          logs: async () => { await loadLogs(); return ''; },
          screenshot: async () => {
            const r = await fetch('/api/screenshot.png', { cache: 'no-store', credentials: 'same-origin' });
            if (!r.ok) throw new Error((await r.json().catch(() => ({}))).error?.message || String(r.status));
            const img = field('screenshot');
            if (img.src) URL.revokeObjectURL(img.src);
            img.src = URL.createObjectURL(await r.blob());
            set('screenshot-note', r.headers.get('X-Adplayerd-Screenshot-Note') || '');
            return '';
          },
        };

        // The event stream. A refused one (a 503: every stream taken) is closed for good by the
        // browser: tried again here after 1 s doubling to 30 s (with jitter), and once it is open
        // the page catches up on what it missed meanwhile.
        let followBackoff = 1000;
        function follow() {
          const source = new EventSource('/events');
          source.onopen = () => {
            followBackoff = 1000;
            get('/api/status').then(renderStatus).catch(() => {});
            get('/api/health').then(renderHealth).catch(() => {});
            loadPlays();
          };
          source.addEventListener('status', (m) => renderStatus(Object.assign(status && status.box ? { box: status.box } : {}, JSON.parse(m.data))));
          source.addEventListener('health', (m) => renderHealth(JSON.parse(m.data)));
          source.addEventListener('protocol', (m) => applyEvent(JSON.parse(m.data)));
          source.addEventListener('daemon', (m) => { const up = JSON.parse(m.data).connected; set('daemon', up ? 'daemon answers' : 'daemon not answering'); field('daemon').className = 'pill ' + (up ? 'ok' : 'failing'); });
          source.onerror = () => {
            set('daemon', 'web server not answering'); field('daemon').className = 'pill failing';
            if (source.readyState === EventSource.CLOSED) {
              source.close();
              const wait = followBackoff * (0.5 + Math.random() / 2);
              followBackoff = Math.min(followBackoff * 2, 30000);
              setTimeout(follow, wait);
            }
          };
        }

        document.addEventListener('DOMContentLoaded', () => {
          for (const button of document.querySelectorAll('[data-action]')) {
            button.addEventListener('click', async () => {
              const action = actions[button.dataset.action];
              set('message', '…');
              try { const said = await action(); set('message', typeof said === 'string' ? said : button.dataset.action + ': done'); }
              catch (e) { set('message', button.dataset.action + ': ' + e.message); }
            });
          }
          get('/api/status').then(renderStatus).catch((e) => set('state', 'unknown: ' + e.message));
          get('/api/health').then(renderHealth).catch(() => fetch('/api/health').then(r => r.json()).then(renderHealth).catch(() => {}));
          loadPlays();
          loadLogs();
          follow();
          setInterval(renderPosition, 250);
        });

        """#
}
