"""How long each docs page is, in screens of a 1280 x 800 browser window, and what its first three screens show.

    python benchmark/docs_screens.py --out docs/benchmark/screens

Builds the site (mkdocs build --strict), serves it on localhost, measures every page's height in headless
Chromium (Debian's `chromium` package) and saves the first three screens of each page as `{page}.png`
(1280 x 2400). README.md is rendered as GitHub shows it on a repository's front page at that width (its column
830 px wide beside the About sidebar, 16 px text, 13.6 px code). Writes `{out}/screens.csv`: page, height in
pixels, screens (height / 800), commit, machine.
"""

import argparse
import functools
import http.server
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import pandas as pd  # noqa: E402
from PIL import Image  # noqa: E402

from muzero_tools import REPO, BadInput, fail, git_commit, machine_line  # noqa: E402

WIDTH, SCREEN, SHOWN = 1280, 800, 3  # window width and height in pixels; screens saved per page
# A page inside a same-origin frame of the window's size; the frame's document height is written into the DOM
# that Chromium dumps (headless Chromium has no other way to return a value from the command line).
MEASURE = """<html><body><div id="out">pending</div><iframe id="f" style="width:{w}px;height:{h}px;border:0"></iframe>
<script>const f = document.getElementById("f");
f.onload = () => setTimeout(() => {{
  document.getElementById("out").textContent = "HEIGHT=" + f.contentDocument.documentElement.scrollHeight;
}}, 1000);
f.src = new URLSearchParams(location.search).get("page");</script></body></html>"""


# README.md in a column as wide as GitHub's README box on a 1280 px window (the rest of the width: the sidebar)
README_PAGE = """<html><head><meta charset="utf-8"><style>
body {{ margin: 0; font: 16px/1.5 -apple-system, "Segoe UI", "Noto Sans", Helvetica, Arial, sans-serif; }}
main {{ width: 830px; margin: 24px 0 0 32px; }}
pre {{ background: #f6f8fa; padding: 16px; overflow: auto; font-size: 13.6px; line-height: 1.45; }}
code {{ font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 85%; }}
pre code {{ font-size: 100%; }}
table {{ border-collapse: collapse; display: block; overflow: auto; }}
td, th {{ border: 1px solid #d0d7de; padding: 6px 13px; }}
img {{ max-width: 100%; }}
</style></head><body><main>{body}</main></body></html>"""


def write_readme_page(site: str):
    """README.md as README.html in the built site, its docs/ links and pictures pointing into the site."""
    import markdown

    with open(os.path.join(REPO, "README.md")) as f:
        body = markdown.markdown(f.read(), extensions=["tables", "fenced_code"])
    body = body.replace('src="docs/', 'src="').replace('href="docs/', 'href="')
    with open(os.path.join(site, "README.html"), "w") as f:
        f.write(README_PAGE.format(body=body))


def chromium(*flags: str) -> str:
    cmd = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *flags]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout


def page_screens(url: str, page: str, png: str) -> int:
    """The page's height in pixels; its first SHOWN screens saved to `png`."""
    dom = chromium(
        f"--window-size={WIDTH + 100},{SCREEN + 100}",
        "--virtual-time-budget=5000",
        "--dump-dom",
        f"{url}/measure.html?page=/{page}",
    )
    height = re.search(r"HEIGHT=(\d+)", dom)
    if height is None:
        fail(f"Chromium did not measure {page}: is the page built?")
    shot = png + ".full.png"
    chromium(f"--window-size={WIDTH},{SCREEN * SHOWN}", f"--screenshot={shot}", f"{url}/{page}")
    Image.open(shot).convert("RGB").crop((0, 0, WIDTH, SCREEN * SHOWN)).quantize(256).save(png, optimize=True)
    os.remove(shot)
    return int(height.group(1))


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def main(out: str):
    if shutil.which("chromium") is None:
        fail("no `chromium` on PATH: apt-get install chromium")
    site = tempfile.mkdtemp()
    subprocess.run(["mkdocs", "build", "--strict", "-q", "-d", site], cwd=REPO, check=True)
    with open(os.path.join(site, "measure.html"), "w") as f:
        f.write(MEASURE.format(w=WIDTH, h=SCREEN))
    write_readme_page(site)
    handler = functools.partial(Quiet, directory=site)
    server = http.server.ThreadingHTTPServer(("localhost", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://localhost:{server.server_address[1]}"
    os.makedirs(out, exist_ok=True)
    rows = []
    folders = sorted(n for n in os.listdir(site) if os.path.exists(os.path.join(site, n, "index.html")))
    pages = [("", "index"), *((f"{n}/", n) for n in folders), ("README.html", "README")]  # index.md: the site's root
    for folder, name in pages:
        height = page_screens(url, folder, os.path.join(out, f"{name}.png"))
        rows.append({"page": f"{name}.md", "height_px": height, "screens": round(height / SCREEN, 1)})
        print(f"{name}.md: {height} px, {height / SCREEN:.1f} screens", flush=True)
    server.shutdown()
    shutil.rmtree(site)
    table = pd.DataFrame(rows).assign(commit=git_commit(out), machine=machine_line())
    table.to_csv(os.path.join(out, "screens.csv"), index=False)
    print(table.to_string(index=False))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="docs/benchmark/screens", help="folder of screens.csv and the pictures")
    try:
        main(parser.parse_args().out)
    except BadInput as e:
        parser.error(str(e))
