"""The hostile matrix: every bad-input case of tests/test_bad_input.py (the four scripts' flags and the tools'
flags and files) run as a user runs it, a fresh process on the command line, each held to: exit status 2, the
message naming the flag or file, no traceback, nothing written, within 10 s. One row per case in
docs/benchmark/bad_input/matrix.csv, with the machine line; the count of clean cases printed.

    python benchmark/bad_input_matrix.py
"""

import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

import muzero_tools  # noqa: E402
from test_bad_input import CASES, TOOL_CASES  # noqa: E402

ENV = {**os.environ, "WANDB_MODE": "disabled", "COLUMNS": "500"}
SETUP_ONLY_IN_PROCESS = ("no_statsmodels", "no_graphviz")  # they block an import in the test's process only


def run_case(command: list, named: str, setup) -> dict:
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        if setup:
            setup(cwd)
        before = {p: p.read_bytes() for p in cwd.rglob("*") if p.is_file()}
        start = time.time()
        out = subprocess.run([sys.executable, *command], cwd=cwd, env=ENV, capture_output=True, text=True, timeout=120)
        seconds = time.time() - start
        after = {p: p.read_bytes() for p in cwd.rglob("*") if p.is_file()}
    lines = out.stderr.strip().splitlines()
    row = dict(
        command=" ".join(command[0:1] + [c if len(c) < 60 else c[:57] + "..." for c in command[1:]]),
        exit=out.returncode,
        seconds=round(seconds, 1),
        named=named in out.stderr,
        traceback="Traceback" in out.stderr,
        unchanged=before == after,
        last_line=lines[-1][:200] if lines else "",
    )
    row["clean"] = row["exit"] == 2 and row["named"] and not row["traceback"] and row["unchanged"] and seconds < 10
    return row


def main():
    cases = [([f"{script.__name__}.py", *flags.split()], named, setup) for script, flags, named, setup in CASES]
    cases += [
        (["muzero_tools.py", tool, *flags.split()], named, setup)
        for tool, flags, named, setup in TOOL_CASES
        if getattr(setup, "__name__", "") not in SETUP_ONLY_IN_PROCESS
    ]
    rows = []
    for command, named, setup in cases:
        command = [str(ROOT / command[0]), *command[1:]]
        rows.append(run_case(command, named, setup))
        rows[-1]["command"] = rows[-1]["command"].replace(str(ROOT) + "/", "")
        print(("clean " if rows[-1]["clean"] else "FAILED ") + rows[-1]["command"], f"{rows[-1]['seconds']} s", flush=True)
    out = ROOT / "docs" / "benchmark" / "bad_input"
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "matrix.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, [*rows[0], "machine", "commit"])
        writer.writeheader()
        machine, commit = muzero_tools.machine_line(), muzero_tools.git_commit(str(out))
        writer.writerows({**row, "machine": machine, "commit": commit} for row in rows)
    clean = sum(row["clean"] for row in rows)
    print(f"{clean} of {len(rows)} cases clean; slowest {max(row['seconds'] for row in rows)} s; {out / 'matrix.csv'}")


if __name__ == "__main__":
    main()
