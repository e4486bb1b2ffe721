"""The docs pages show each variant's filediff against muzero_minatar.py as it is now."""

import os
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize(
    "variant, bound",
    [
        ("muzero_minatar_reanalyze", 150),  # the diff holds reanalyze and nothing else
        ("muzero_breakthrough", 330),  # two players, and the random moves that cut the returns
        ("muzero_atari_multigpu", 300),  # Atari (the threads, pmap and hosts are the base script's)
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
