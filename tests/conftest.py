import atexit
import glob
import json
import os
import shutil
import sys
import tempfile

import numpy as np
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


def cpu_caches() -> str:
    """This machine's data and unified caches as Linux reports them for cpu0, e.g. "L1d 32K, L2 512K, L3 32768K":
    Eigen sizes the blocks of a matrix product by them, which sets the order of its sums (docs/reproducibility.md)."""
    caches = []
    for index in sorted(glob.glob("/sys/devices/system/cpu/cpu0/cache/index*")):
        level, kind, size = (open(os.path.join(index, f)).read().strip() for f in ("level", "type", "size"))
        if kind != "Instruction":
            caches.append(f"L{level}{'d' if kind == 'Data' else ''} {size}")
    return ", ".join(caches)


def golden_path(name: str, caches: str) -> str:
    """tests/golden/{name}.{L1 data cache}.json, e.g. muzero_minatar.L1d-32K.json: of the caches, only the L1 data
    cache's size has changed the numbers on the lines checked (docs/reproducibility.md)."""
    l1d = next(cache for cache in caches.split(", ") if cache.startswith("L1d"))
    return os.path.join(GOLDEN_DIR, f"{name}.{l1d.replace(' ', '-')}.json")


def golden_text(golden: dict) -> str:
    """The golden file's JSON with one line per logged tag, so that a diff shows which series moved."""
    series = ",\n".join(f"  {json.dumps(tag)}: {json.dumps(values)}" for tag, values in golden["series"].items())
    head = json.dumps({k: v for k, v in golden.items() if k != "series"}, indent=1)[:-2]
    return f'{head},\n "series": {{\n{series}\n }}\n}}\n'


def first_difference(got: list, expected: list) -> int | None:
    """Index of the first entry where two series differ (a missing or extra entry counts), None if equal."""
    if got == expected:
        return None
    return next((i for i, (a, b) in enumerate(zip(got, expected)) if a != b), min(len(got), len(expected)))


def check_across_caches(series: dict, golden: dict) -> list[str]:
    """What a run on other caches shares with a golden run (docs/reproducibility.md): every entry logged before
    the first losses, value for value, and the first entry of each loss to 10% (the updates before it trained on
    data that parameters already differing in their last bits played). Returns the differences found."""
    first_update = min(values[0][0] for tag, values in golden["series"].items() if tag.startswith("losses/"))
    problems = []
    for tag, expected in golden["series"].items():
        got = series[tag]
        if tag.startswith("losses/"):
            (step, value), (want_step, want) = got[0], expected[0]
            if step != want_step or not np.isclose(value, want, rtol=0.1, atol=1e-6):
                problems.append(f"{tag}: first entry {[step, value]} instead of {[want_step, want]}")
        elif [e for e in got if e[0] < first_update] != [e for e in expected if e[0] < first_update]:
            problems.append(f"{tag}: entries before step {first_update} differ")
    return problems


def pytest_addoption(parser):
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="write tests/golden/*.json of this machine's L1 data cache size from its runs instead of comparing with them",
    )


@pytest.fixture(scope="session")
def golden(request):
    """golden(name, command, series) checks a short run's logged values, {tag: [(step, value), ...]}, against the
    golden run of this machine's L1 data cache size, tests/golden/{name}.L1d-{size}.json, value for value (the same
    seed and pinned install give the same numbers where that size is the same). Where no golden run has this
    machine's size, it checks what runs on other caches share with each one committed (check_across_caches). With
    --update-golden it writes this machine's file, with the machine line and the command that made it."""
    update = request.config.getoption("--update-golden")

    def check(name: str, command: list[str], series: dict):
        caches = cpu_caches()
        path = golden_path(name, caches)
        # sorted within a tag: threads of one process may write the entries of one step in either order
        series = {tag: sorted([step, value] for step, value in values) for tag, values in sorted(series.items())}
        if update:
            from muzero_tools import git_commit, machine_line

            os.makedirs(GOLDEN_DIR, exist_ok=True)
            made_by = {"command": " ".join(command), "machine": machine_line(), "caches": caches}
            with open(path, "w") as f:
                f.write(golden_text({**made_by, "commit": git_commit(GOLDEN_DIR), "series": series}))
            return
        paths = [path] if os.path.exists(path) else sorted(glob.glob(os.path.join(GOLDEN_DIR, f"{name}.*.json")))
        assert paths, f"no golden run of {name} in {GOLDEN_DIR}: --update-golden"
        for golden_file in paths:
            with open(golden_file) as f:
                expected = json.load(f)
            assert expected["command"] == " ".join(command), f"{golden_file} was made by another command: --update-golden"
            assert sorted(series) == sorted(expected["series"]), "other tags logged"
            made_on = f"the golden run made on {expected['machine']} ({expected['caches']}) at {expected['commit']}"
            if golden_file != path:
                problems = check_across_caches(series, expected)
                assert not problems, f"on caches {caches}, against {made_on}: " + "; ".join(problems)
                continue
            for tag, values in expected["series"].items():
                first = first_difference(series[tag], values)
                assert first is None, (
                    f"{tag} differs from {made_on}, from entry {first} on: {series[tag][first : first + 2]} instead "
                    f"of {values[first : first + 2]} ([step, value])"
                )

    return check
