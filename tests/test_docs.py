"""The docs pages show each variant's filediff against muzero_minatar.py as it is now, stay short, and read as a
reference rather than a diary."""

import csv
import glob
import os
import re
import shutil
import subprocess

import pytest

import muzero_tools as tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize(
    "variant, bound",
    [
        ("muzero_minatar_reanalyze", 250),  # the diff holds reanalyze and nothing else
        ("muzero_breakthrough", 320),  # two players, and the random moves that cut the returns
        ("muzero_atari_multigpu", 320),  # Atari, and the references' support, Q floor and undivided move
    ],
)
def test_docs_show_the_current_filediff(variant, bound):
    names = ["muzero_minatar.py", f"{variant}.py"]
    path = f"docs/benchmark/{variant}/filediff.diff"
    diff = subprocess.run(
        ["diff", "-u", "--label", names[0], "--label", names[1], *names], cwd=ROOT, capture_output=True, text=True
    ).stdout
    with open(os.path.join(ROOT, path)) as f:
        assert f.read() == diff, f"regenerate it: diff -u --label {names[0]} --label {names[1]} {' '.join(names)} > {path}"
    changed = [line for line in diff.splitlines()[2:] if line[:1] in "+-"]
    assert len(changed) <= bound


PAGES = sorted(glob.glob(os.path.join(ROOT, "docs", "*.md")))
SCRIPT_PAGES = [
    f"{name}.md" for name in ("muzero_minatar", "muzero_minatar_reanalyze", "muzero_breakthrough", "muzero_atari_multigpu")
]
# words a lab diary uses and a reference does not
DIARY = re.compile(
    r"\b(?:[Tt]his session|[Ss]essions?|[Ii]ssue \d+|[Ii]ssue's|I|[Ww]e tried|today we|(?i:not yet|not repeated since|"
    r"now set|before it became|the next lever|our reading|does not explain yet|ran at [0-9a-f]{7,40}))\b"
)


def page_text(path: str) -> str:
    """A page's markdown with its snippets (--8<--) in place, as it renders, except a filediff, which renders folded."""
    with open(path) as f:
        lines = f.readlines()
    parts = []
    for line in lines:
        include = re.match(r'\s*--8<-- "([^"]+)"', line)
        if include and not include.group(1).endswith(".diff"):
            parts.append(page_text(os.path.join(ROOT, include.group(1))))
        elif not include:
            parts.append(line)
    return "".join(parts)


def test_page_text_counts_snippets_and_leaves_the_diff_out(tmp_path):
    (tmp_path / "table.md").write_text("| one | two |\n")
    page = tmp_path / "page.md"
    page.write_text(f'Intro.\n\n--8<-- "{tmp_path}/table.md"\n\n--8<-- "{tmp_path}/x.diff"\n')
    assert page_text(str(page)) == "Intro.\n\n| one | two |\n\n"


@pytest.mark.parametrize("page", SCRIPT_PAGES)
def test_script_pages_stay_under_3000_words(page):
    words = re.findall(r"[A-Za-z0-9][\w'.,/-]*", page_text(os.path.join(ROOT, "docs", page)))
    assert len(words) <= 3000, f"{page}: {len(words)} words; history and ablations go to experiment_log.md"


@pytest.mark.parametrize("page", SCRIPT_PAGES + ["analysis.md"])
def test_each_script_page_links_the_source_page_that_renders_its_file(page):
    script = "muzero_tools" if page == "analysis.md" else page[: -len(".md")]
    with open(os.path.join(ROOT, "docs", page)) as f:
        assert f"](source/{script}.md)" in f.read()
    with open(os.path.join(ROOT, "docs", "source", f"{script}.md")) as f:
        assert f'--8<-- "{script}.py"' in f.read()


@pytest.mark.parametrize("page", [os.path.basename(p) for p in PAGES])
def test_no_page_reads_as_a_diary(page):
    found = DIARY.findall(page_text(os.path.join(ROOT, "docs", page)))
    assert not found, f"{page}: {found}; write results with their commit and machine line instead"


RESULTS = sorted(glob.glob(os.path.join(ROOT, "docs", "benchmark", "**", "results.md"), recursive=True))


@pytest.mark.parametrize("results", [os.path.relpath(p, ROOT) for p in RESULTS])
def test_result_tables_are_what_report_writes_from_the_committed_csvs(results, tmp_path):
    folder = os.path.dirname(os.path.join(ROOT, results))
    for path in glob.glob(os.path.join(folder, "*.csv")) + glob.glob(os.path.join(folder, "ppo", "*.csv")):
        os.makedirs(tmp_path / os.path.relpath(os.path.dirname(path), folder), exist_ok=True)
        shutil.copy(path, tmp_path / os.path.relpath(path, folder))
    tools.run_report(tools.Report(str(tmp_path), figures=False))
    with open(os.path.join(ROOT, results)) as committed:
        assert (tmp_path / "results.md").read_text() == committed.read(), (
            f"regenerate it: python muzero_tools.py report --out {os.path.dirname(results)} --no-figures"
        )


@pytest.mark.parametrize("results", [os.path.relpath(p, ROOT) for p in RESULTS])
def test_every_results_table_is_followed_by_its_protocol_line(results):
    with open(os.path.join(ROOT, results)) as f:
        blocks = [block.splitlines() for block in f.read().split("\n\n")]
    for i, block in enumerate(blocks):
        if block[0].startswith("|"):
            after = blocks[i + 1] if i + 1 < len(blocks) else []
            assert any(line.startswith("Protocol") for line in after), f"{results}: no protocol line under {block[0]}"


def test_the_committed_screens_cover_every_page_and_each_page_fits_12_screens():
    """`python benchmark/docs_screens.py` (headless Chromium, not in CI) wrote them; a page added without new screens fails."""
    folder = os.path.join(ROOT, "docs", "benchmark", "screens")
    with open(os.path.join(folder, "screens.csv")) as f:
        rows = list(csv.DictReader(f))
    assert sorted(row["page"] for row in rows) == sorted([os.path.basename(p) for p in PAGES] + ["README.md"])
    for row in rows:
        assert float(row["screens"]) <= 12.0, f"{row['page']}: {row['screens']} screens at 1280 x 800"
        assert os.path.exists(os.path.join(folder, row["page"].replace(".md", ".png")))
