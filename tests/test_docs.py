"""The docs pages show each variant's filediff against muzero_minatar.py as it is now, stay short, and read as a
reference rather than a diary."""

import csv
import glob
import os
import re
import shutil
import subprocess

import numpy as np
import pandas as pd
import pytest

import muzero_tools as tools

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize(
    "variant, bound",
    [
        ("muzero_minatar_reanalyze", 250),  # the diff holds reanalyze and nothing else
        ("muzero_breakthrough", 280),  # two players, and the random moves that cut the returns
        ("muzero_atari_multigpu", 291),  # Atari, the references' support, Q floor and undivided move, the first
        # convolution over untiled action planes, and an evaluation that searches only the games still playing
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
    with open(os.path.join(ROOT, "docs", f"{variant}.md")) as f:
        stated = [int(count) for count in re.findall(r"(\d+) changed lines", f.read())]
    assert all(count == len(changed) for count in stated), f"docs/{variant}.md states {stated}, the diff {len(changed)}"


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


# a commit hash: 7-40 hex digits with at least one letter and one digit
COMMIT = re.compile(r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])[0-9a-f]{7,40}\b")


def hashes_in_prose(text: str) -> list[str]:
    """Commit hashes outside tables of runs: outside table rows, the caption paragraph right under a table (its
    protocol, machine and commits), code blocks and inline code (commands such as `git show <commit>:<file>`)."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    found, after_table = [], False
    for block in re.split(r"\n\s*\n", text):
        lines = [line.strip() for line in block.splitlines() if line.strip()]
        if not lines:
            continue
        if not after_table:
            prose = re.sub(r"`[^`]*`", "", "\n".join(line for line in lines if not line.startswith("|")))
            found += COMMIT.findall(prose)
        after_table = any(line.startswith("|") for line in lines)
    return found


def test_hashes_in_prose_finds_a_commit_in_text_and_not_in_a_table_its_caption_or_code():
    text = "Run at abc1234.\n\n| run | commit |\n|---|---|\n| a | def5678 |\n\nCommits: def5678.\n\n`git show 9abc123:x`\n"
    assert hashes_in_prose(text) == ["abc1234"]
    assert hashes_in_prose("SHA 1234567 and deadbee, digits or letters alone\n") == []


@pytest.mark.parametrize("page", [os.path.basename(p) for p in PAGES] + ["../README.md"])
def test_no_page_names_a_commit_outside_tables_of_runs(page):
    found = hashes_in_prose(page_text(os.path.join(ROOT, "docs", page)))
    assert not found, f"{page}: {found}; a result's commit belongs in its table of runs"


# a quoted result: two or more decimals, or a percentage (thesis sections such as 5.8 and versions are neither)
QUOTED = re.compile(r"(?<![\d.])[-+]?(?:\d+\.\d+%|\d+\.\d{2,}|\d+%)(?!\.?\d)")
# the CSVs the analysis page's models and tools wrote
ANALYSIS_CSVS = [
    "docs/benchmark/analysis/**/*.csv",
    "docs/benchmark/muzero_breakthrough/*.csv",
    "docs/benchmark/muzero_breakthrough/ladder/seed1/*.csv",
    "docs/benchmark/muzero_minatar/Breakout.csv",
    "docs/benchmark/muzero_minatar/runs.csv",
]


def quoted_numbers(text: str) -> list[str]:
    """The results a page's prose quotes, outside code and link targets, with a range's dash not read as a sign."""
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    text = re.sub(r"`[^`]*`|\]\([^)]*\)", " ", text)
    return [token.lstrip("+") for token in QUOTED.findall(text)]


def in_tables(token: str, values: np.ndarray) -> bool:
    """Whether some value rounds to the token at its precision (a percentage: the share it stands for)."""
    digits = len(token.rstrip("%").partition(".")[2]) + 2 * token.endswith("%")
    number = float(token.rstrip("%")) / (100 if token.endswith("%") else 1)
    return bool(np.any(np.isclose(np.round(values, digits), number, rtol=0, atol=10.0 ** -(digits + 3))))


def test_quoted_numbers_are_read_at_their_precision():
    assert quoted_numbers("v* +0.12 (5.8), 1.3%, 0.01-0.26%, JAX 0.10.2, `0.99`, 43.34") == [
        "0.12",
        "1.3%",
        "0.01",
        "0.26%",
        "43.34",
    ]
    assert in_tables("1.3%", np.array([0.01257])) and in_tables("-0.91", np.array([-0.909]))
    assert not in_tables("0.47", np.array([0.4649, 0.36]))


def test_every_number_the_analysis_page_quotes_is_in_a_committed_csv():
    values = []
    for pattern in ANALYSIS_CSVS:
        for path in glob.glob(os.path.join(ROOT, pattern), recursive=True):
            table = pd.read_csv(path).select_dtypes("number")
            values.append(table.to_numpy(dtype=float).ravel())
    values = np.concatenate(values)
    missing = [t for t in quoted_numbers(page_text(os.path.join(ROOT, "docs", "analysis.md"))) if not in_tables(t, values)]
    assert not missing, f"analysis.md quotes {missing}, which no CSV of its models holds"


RESULTS = sorted(glob.glob(os.path.join(ROOT, "docs", "benchmark", "**", "results.md"), recursive=True))


@pytest.mark.parametrize("results", [os.path.relpath(p, ROOT) for p in RESULTS])
def test_result_tables_are_what_report_writes_from_the_committed_csvs(results, tmp_path):
    folder = os.path.dirname(os.path.join(ROOT, results))
    inputs = ("*.csv", "ppo/*.csv", "ppo/muzero/*.csv")  # the report's tables (ppo/muzero: ours on PPO's machine)
    for path in [found for pattern in inputs for found in glob.glob(os.path.join(folder, pattern))]:
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


def test_the_results_tree_is_indexed_and_small():
    """docs/benchmark/README.md has a row for every folder one and two levels down and for no other: a folder left
    behind, or a row whose folder is gone, fails. The tree holds at most 600 files: 464 besides the Atari suite's
    games, which write 4 files each (curve, picture, training returns, console log; 568 at 26 games) and a log a
    second seed (594)."""
    root = os.path.join(ROOT, "docs", "benchmark")
    with open(os.path.join(root, "README.md")) as f:
        rows = re.findall(r"^\| `([^`]+)/` \|", f.read(), flags=re.MULTILINE)
    assert len(rows) == len(set(rows)), "a folder with two rows"
    folders = [
        os.path.relpath(d, root) for d in glob.glob(os.path.join(root, "*", "")) + glob.glob(os.path.join(root, "*", "*", ""))
    ]
    assert sorted(rows) == sorted(folders)
    files = [p for p in glob.glob(os.path.join(root, "**"), recursive=True) if os.path.isfile(p)]
    assert len(files) <= 600


def test_the_experiment_log_is_a_reference_of_at_most_6000_words():
    """One section per question under each script's heading, each opening with its answer in one line."""
    with open(os.path.join(ROOT, "docs", "experiment_log.md")) as f:
        text = f.read()
    assert len(text.split()) <= 6000
    sections = re.split(r"^### ", text, flags=re.MULTILINE)[1:]
    assert len(sections) >= 15
    for section in sections:
        title, body = section.split("\n", 1)
        assert body.lstrip().startswith("**Answer:**"), f"{title}: no answer line"
