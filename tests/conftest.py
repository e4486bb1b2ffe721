import atexit
import json
import os
import shutil
import sys
import tempfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

# One persistent compilation cache for this process and every process the tests start (set before jax is
# imported): the short runs of a script compile the same functions, so only the first run pays for them.
CACHE_DIR = tempfile.mkdtemp(prefix="muzero_tests_jax_cache_")
atexit.register(shutil.rmtree, CACHE_DIR, ignore_errors=True)
os.environ.update(
    JAX_COMPILATION_CACHE_DIR=CACHE_DIR,
    JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
    JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="-1",
)
GOLDEN_DIR = os.path.join(ROOT, "tests", "golden")


def golden_text(golden: dict) -> str:
    """The golden file's JSON with one line per logged tag, so that a diff shows which series moved."""
    series = ",\n".join(f"  {json.dumps(tag)}: {json.dumps(values)}" for tag, values in golden["series"].items())
    head = json.dumps({k: v for k, v in golden.items() if k != "series"}, indent=1)[:-2]
    return f'{head},\n "series": {{\n{series}\n }}\n}}\n'


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="write tests/golden/*.json from this machine's runs instead of comparing with them",
    )


@pytest.fixture(scope="session")
def golden(request):
    """golden(name, command, series) checks a short run's logged values, {tag: [(step, value), ...]}, against
    tests/golden/{name}.json value for value (the same seed and pinned install give the same numbers; which
    CPU lines agree is in docs/reproducibility.md); with --update-golden it writes that file, with the machine
    line and the command that made it."""
    update = request.config.getoption("--update-golden")

    def check(name: str, command: list[str], series: dict):
        path = os.path.join(GOLDEN_DIR, f"{name}.json")
        # sorted within a tag: threads of one process may write the entries of one step in either order
        series = {tag: sorted([step, value] for step, value in values) for tag, values in sorted(series.items())}
        if update:
            from muzero_tools import git_commit, machine_line

            os.makedirs(GOLDEN_DIR, exist_ok=True)
            with open(path, "w") as f:
                f.write(
                    golden_text(
                        {
                            "command": " ".join(command),
                            "machine": machine_line(),
                            "commit": git_commit(GOLDEN_DIR),
                            "series": series,
                        }
                    )
                )
            return
        with open(path) as f:
            expected = json.load(f)
        assert expected["command"] == " ".join(command), f"{path} was made by another command: --update-golden"
        assert sorted(series) == sorted(expected["series"]), "other tags logged"
        for tag, values in expected["series"].items():
            got = series[tag]
            first = next((i for i, (a, b) in enumerate(zip(got, values)) if a != b), min(len(got), len(values)))
            assert got == values, (
                f"{tag} differs from the golden run made on {expected['machine']} at "
                f"{expected['commit']}, from entry {first} on: {got[first : first + 2]} instead of "
                f"{values[first : first + 2]} ([step, value])"
            )

    return check
