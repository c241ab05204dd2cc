"""The HTML report rendered by a real browser: Debian's Chromium, headless.

The page must load with its timeline image decoded (naturalWidth > 0 from the embedded
data: URI) and its tables, with no network access at all (self-contained).
"""

import re
import shutil
import subprocess
import sys
from pathlib import Path

from chaos.reports import report

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "unit"))
from test_report import _write_run  # noqa: E402

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
PROBE = """<script>
window.addEventListener('load', () => {
  const imgs = [...document.images].map(i => i.complete + ':' + i.naturalWidth + 'x' + i.naturalHeight);
  document.body.setAttribute('data-images', imgs.join(','));
  document.body.setAttribute('data-rows', document.querySelectorAll('table.faults tbody tr').length);
});
</script>"""


def test_html_report_renders_in_headless_chromium(tmp_path):
    assert Path(CHROMIUM).exists(), "chromium is missing: scripts/bootstrap.sh installs it (as root)"
    run = tmp_path / "run"
    _write_run(run, outage_s=3.0)
    page = report.write(run, ("html",))["html"]
    probed = tmp_path / "probed.html"
    probed.write_text(page.read_text().replace("</body>", PROBE + "</body>"))
    shot = tmp_path / "shot.png"
    common = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
              "--disable-background-networking", "--disable-component-update", "--disable-sync",
              f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000"]
    dom = subprocess.run(common + ["--dump-dom", probed.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    m = re.search(r'data-images="([^"]*)"', dom.stdout)
    assert m, "the page's load event never ran: " + dom.stdout[:500]
    assert m.group(1) == "true:1000x560", m.group(1)  # the 10x5.6 in, 100 dpi timeline, decoded
    assert re.search(r'data-rows="1"', dom.stdout)
    assert "synthetic node kill" in dom.stdout and "time to steady state s" in dom.stdout
    out = subprocess.run(common + [f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and shot.read_bytes().startswith(b"\x89PNG")
