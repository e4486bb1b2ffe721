"""Bad input as a hostile new user gives it: every script and tool refuses it before anything is compiled or written,
with exit status 2 and a message naming the flag (the command line runs in this process)."""

import json
import os
import runpy
import sys

import pytest

import muzero_atari_multigpu as ma
import muzero_breakthrough as bt
import muzero_minatar as m
import muzero_minatar_reanalyze as r
import muzero_run
import muzero_tools as tools
from test_runs import assert_refused
from test_tools import small_agent


def finished_run(cwd):
    """A run directory whose run has finished."""
    os.makedirs(cwd / "runs" / "done")
    (cwd / "runs" / "done" / muzero_run.FINISHED_FILE).write_text('{"step": 1024, "updates": 4}')


def other_scripts_checkpoint(cwd):
    """A checkpoint of the reanalyze script, with this script's default flags."""
    os.makedirs(cwd / "runs" / "other")
    with open(cwd / "runs" / "other" / muzero_run.CHECKPOINT_FILE, "wb") as f:
        muzero_run.write_checkpoint(f, r.SCRIPT, dict(args=dict(vars(m.Args(resume="runs/other")))))


def runs_is_a_file(cwd):
    (cwd / "runs").write_text("not a folder")


MEMORY = "GiB, mostly for "  # check_memory's message: the flag that needs the most memory comes first
CASES = [  # (script, command-line flags, what the message must name, what is on disk before)
    (m, "--env-id Pong", "--env-id", None),
    (m, "--num-envs 0", "--num-envs", None),
    (m, "--replay-ratio 0", "--replay-ratio", None),
    (m, "--batch-size 512 --buffer-size 256 --num-envs 4 --num-steps 8", "--batch-size", None),
    (m, "--learning-starts 1000000000", "--learning-starts", None),
    (m, "--gamma 1.5", "--gamma", None),
    (m, "--total-timesteps 100", "--total-timesteps", None),
    (m, "--max-episode-steps 0", "--max-episode-steps", None),
    (m, "--seed -1", "--seed", None),
    (m, "--seed 4294967296", "--seed", None),  # JAX's 32-bit keys would silently wrap it to 0
    (m, "--exp-name a/b", "--exp-name", None),
    (m, "--exp-name " + "x" * 300, "--exp-name", None),  # the run's directory name would be too long
    (m, "--replay-ratio 1000", "--replay-ratio", None),  # 4,000 updates per iteration, silent for minutes
    (m, "--value-coef nan", "--value-coef must be a finite number", None),
    (m, "--learning-rate inf", "--learning-rate must be a finite number", None),
    (m, "--consistency-coef inf", "--consistency-coef", None),
    (m, "--priority-epsilon -1", "--priority-epsilon must be positive", None),
    (m, "--priority-exponent nan", "--priority-exponent", None),
    (m, "--importance-exponent 2", "--importance-exponent", None),
    (m, "--pb-c-init -5", "--pb-c-init must be non-negative", None),
    (m, "--dirichlet-alpha inf", "--dirichlet-alpha", None),
    (m, "--gumbel-scale nan", "--gumbel-scale", None),
    (m, "--eval-gumbel-scale -1", "--eval-gumbel-scale must be non-negative", None),
    (m, "--buffer-size 1000000000000", MEMORY + "--buffer-size", None),
    (m, "--num-simulations 100000000", MEMORY + "--num-envs/--num-simulations", None),
    (m, "--eval-episodes 1000000000", MEMORY + "--eval-episodes/--eval-num-simulations", None),
    (m, "--support-size 100000000", MEMORY + "--channels/--head-hidden/--support-size", None),
    (m, "--num-processes 2 --coordinator-address localhost", "--coordinator-address", None),
    (m, "--distributed-timeout 0", "--distributed-timeout", None),
    (m, "--unroll-steps 100000", "--unroll-steps must be at most an episode", None),  # compiled for minutes, unstoppable
    (m, "--td-steps 100000", "--td-steps must be at most an episode", None),
    (m, "--max-episode-steps 20 --unroll-steps 30", "--unroll-steps must be at most an episode", None),
    (m, "--total-timesteps 100000000000000000000000000000", "--total-timesteps must be at most 10**12", None),
    (m, "--batch-size 4096 --unroll-steps 2000", MEMORY + "--batch-size/--unroll-steps", None),
    (m, "", "runs/", runs_is_a_file),
    (m, "--resume runs/nothing", "--resume", None),
    (m, "--resume runs/done", "the run has finished", finished_run),
    (m, "--resume runs/other", "written by muzero_minatar_reanalyze.py", other_scripts_checkpoint),
    (r, "--reanalyze-mode push --reanalyze-ratio 1", "--reanalyze-ratio", None),
    (r, "--reanalyze-ratio 1.5", "--reanalyze-ratio", None),
    (r, "--reanalyze-pb-c-init nan", "--reanalyze-pb-c-init", None),
    (r, "--reanalyze-pb-c-init -1", "--reanalyze-pb-c-init", None),
    (r, "--learning-rate nan", "--learning-rate", None),
    (r, "--reanalyze-ratio 0.5 --reanalyze-num-simulations 1000000000", MEMORY + "--reanalyze-ratio/", None),
    (r, "--reanalyze-mode push --new-data-max-priority", "--new-data-max-priority must be off in push mode", None),
    (r, "--reanalyze-mode sample --no-learner-priorities --new-data-max-priority", "--learner-priorities must be on", None),
    (bt, "--eval-episodes 3", "--eval-episodes", None),
    (bt, "--board-size 2", "--board-size", None),
    (bt, "--board-size 1000", MEMORY, None),
    (bt, "--eval-mcts-simulations 0", "--eval-mcts-simulations", None),
    (bt, "--eval-mcts-simulations 1000000000", "--eval-mcts-simulations must be in [1, 100000]", None),  # stalled
    (bt, "--td-steps 1000", "--td-steps must be at most 4 --board-size^2", None),
    (bt, "--random-move-prob 1.5", "--random-move-prob", None),
    (bt, "--value-coef nan", "--value-coef", None),
    (ma, "--env-id CartPole-v1", "--env-id", None),
    (ma, "--resolution 40", "--resolution", None),
    (ma, "--buffer-size 1000000000000", MEMORY + "--buffer-size", None),
    (ma, "--resolution 160000", MEMORY, None),  # refused before envpool allocates its frames
    (ma, "--resolution 16000 --buffer-size 256 --num-envs 8 --num-steps 32", "--resolution/--num-envs (", None),
    (ma, "--learning-rate inf", "--learning-rate", None),
    (ma, "--noop-max 1000000000", "--noop-max must be below --max-episode-steps", None),  # a reset of a billion steps
    (ma, "--unroll-steps 100000", "--unroll-steps must be below --max-episode-steps", None),
    # the rule tables and tyro over every kind of flag (the hostile matrix's added cases)
    (m, "--num-steps 0", "--num-steps must be positive", None),
    (m, "--history-length 0", "--history-length must be positive", None),
    (m, "--channels -8", "--channels must be positive", None),
    (m, "--num-simulations 0", "--num-simulations must be positive", None),
    (m, "--eval-num-simulations 0", "--eval-num-simulations must be positive", None),
    (m, "--max-num-considered-actions 0", "--max-num-considered-actions must be positive", None),
    (m, "--target-update-interval 0", "--target-update-interval must be positive", None),
    (m, "--eval-interval 0", "--eval-interval must be positive", None),
    (m, "--num-actor-threads 0", "--num-actor-threads must be positive", None),
    (m, "--num-processes 0", "--num-processes must be positive", None),
    (m, "--log-interval 0", "--log-interval must be positive", None),
    (m, "--temperature 0", "--temperature must be positive", None),
    (m, "--max-grad-norm -1", "--max-grad-norm must be positive", None),
    (m, "--pb-c-base 0", "--pb-c-base must be positive", None),
    (m, "--q-min-range 0", "--q-min-range must be positive", None),
    (m, "--dyn-blocks -1", "--dyn-blocks must be non-negative", None),
    (m, "--eval-episodes -1", "--eval-episodes must be non-negative", None),
    (m, "--checkpoint-interval -1", "--checkpoint-interval must be non-negative", None),
    (m, "--l2-coef -0.1", "--l2-coef must be non-negative", None),
    (m, "--sticky-action-prob 1.5", "--sticky-action-prob must be in [0, 1]", None),
    (m, "--dirichlet-fraction -0.1", "--dirichlet-fraction must be in [0, 1]", None),
    (m, "--gamma 0", "--gamma must be in (0, 1]", None),
    (m, "--process-id 3", "--process-id must be in [0, --num-processes)", None),
    (m, "--max-episode-steps -5", "--max-episode-steps must be positive", None),
    (m, "--seed abc", "--seed", None),  # tyro's own refusals: a type, a choice, an unknown flag
    (m, "--total-timesteps 1e5", "--total-timesteps", None),
    (m, "--planner bogus", "--planner", None),
    (m, "--sampling bogus", "--sampling", None),
    (m, "--no-such-flag 1", "--no-such-flag", None),
    (m, "--env-id", "--env-id", None),
    (m, "--num-actor-threads 3 --batch-size 32", "--batch-size (32) must split evenly", None),
    (m, "--actor-device-ids 7", "--actor-device-ids (7,) must be distinct indices", None),
    (m, "--learner-device-ids 0 0", "--learner-device-ids (0, 0) must be distinct indices", None),
    (m, "--resume /etc/passwd", "--resume /etc/passwd", None),
    (m, "--exp-name ..", "--exp-name", None),
    (r, "--reanalyze-ratio -0.1", "--reanalyze-ratio", None),
    (r, "--reanalyze-mode bogus", "--reanalyze-mode", None),
    (r, "--reanalyze-num-simulations 0", "--reanalyze-num-simulations", None),
    (r, "--total-timesteps 0", "--total-timesteps must be positive", None),
    (r, "--gamma 2", "--gamma must be in (0, 1]", None),
    (bt, "--board-size 0", "--board-size", None),
    (bt, "--random-move-prob -1", "--random-move-prob", None),
    (bt, "--eval-mcts-simulations -1", "--eval-mcts-simulations", None),
    (bt, "--num-envs 0", "--num-envs must be positive", None),
    (bt, "--seed -5", "--seed must be in [0, 2**32 - 1]", None),
    (bt, "--max-episode-steps 0", "--max-episode-steps", None),
    (ma, "--frame-skip 0", "--frame-skip", None),
    (ma, "--noop-max -1", "--noop-max", None),
    (ma, "--history-length 0", "--history-length must be positive", None),
    (ma, "--fire-steps -1", "--fire-steps", None),
    (ma, "--max-episode-steps 0", "--max-episode-steps", None),
    (ma, "--sticky-action-prob 2", "--sticky-action-prob must be in [0, 1]", None),
    (ma, "--resolution 0", "--resolution", None),
    (ma, "--env-id Breakout", "--env-id", None),
    (ma, "--num-envs 0", "--num-envs must be positive", None),
]


@pytest.mark.parametrize(
    "script, flags, named, setup", CASES, ids=[f"{s.__name__[7:]} {f[:40]} {n[-25:]}" for s, f, n, _ in CASES]
)
def test_bad_input_exits_2_naming_the_flag_and_writes_nothing(tmp_path, monkeypatch, capsys, script, flags, named, setup):
    if setup:
        setup(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    assert_refused(script, flags.split(), named, tmp_path, monkeypatch, capsys, runs_dir_allowed=setup is not None)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def files(root):
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def saved_model(truncate: bool = False, flip: bool = False, script=m, drop: tuple = (), **flags):
    """A setup that saves a small model of `script` as m.muzero_model, truncated, with a byte changed, or with other
    flags in its .json or the entries `drop` left out, and a file named `taken`."""

    def setup(cwd):
        args, _, params = small_agent(script)
        muzero_run.save_model(str(cwd / "m.muzero_model"), script.SCRIPT, args, params, 0)
        saved = json.loads((cwd / "m.muzero_model.json").read_text())
        saved = {key: value for key, value in saved.items() if key not in drop}
        (cwd / "m.muzero_model.json").write_text(json.dumps({**saved, **flags}))
        if truncate:
            (cwd / "m.muzero_model").write_bytes((cwd / "m.muzero_model").read_bytes()[:100])
        if flip:  # one byte of a parameter changed: the model still loads as msgpack
            data = bytearray((cwd / "m.muzero_model").read_bytes())
            data[-5] ^= 1
            (cwd / "m.muzero_model").write_bytes(bytes(data))
        (cwd / "taken").write_text("a file")

    return setup


def model_json(content: bytes | None = None, rehash: bool = False, **entries):
    """A setup that saves a small MinAtar model as m.muzero_model, then replaces its .json by `content`, or sets
    `entries` in it; `rehash` gives the flags their checksum anew, as a model saved with those flags would have."""

    def setup(cwd):
        saved_model()(cwd)
        path = cwd / "m.muzero_model.json"
        if content is not None:
            path.write_bytes(content)
            return
        saved = {**json.loads(path.read_text()), **entries}
        if rehash:
            flags = {k: v for k, v in saved.items() if k not in ("script", "format", "sha256", "flags_sha256", "step")}
            saved["flags_sha256"] = muzero_run.flags_sha256(flags)
        path.write_text(json.dumps(saved))

    return setup


BLOCKED_IMPORTS = ("statsmodels.api", "graphviz")  # the setups below make these imports fail; the test puts them back


def no_statsmodels(cwd):
    sys.modules["statsmodels.api"] = None  # its import fails


def no_graphviz(cwd):
    saved_model()(cwd)
    sys.modules["graphviz"] = None


TOOL_CASES = [  # (tool, flags, what the message must name, what is on disk or missing before)
    ("tree", "--model missing.muzero_model", "--model", None),
    ("weights", "--models missing.muzero_model", "--models missing.muzero_model: no", None),
    ("episode", "--model m.muzero_model --seed -1", "--seed must be in [0, 2**32 - 1]", saved_model()),
    ("episode", "--model m.muzero_model --seed 4294967296", "--seed must be in [0, 2**32 - 1]", saved_model()),
    ("match", "--model m.muzero_model --seed -1", "--seed must be in [0, 2**32 - 1]", saved_model()),
    ("budget", "--models m.muzero_model --seed -1", "--seed must be in [0, 2**32 - 1]", saved_model()),
    ("tsne", "--model m.muzero_model --seed -1", "--seed must be in [0, 2**32 - 1]", saved_model()),
    ("episode", "--model m.muzero_model", "its sha256 is not the one in", saved_model(flip=True)),
    ("budget", "--models m --simulations 0 4", "--simulations", None),
    ("episode", "--model m --steps -1", "--steps must be 0", None),
    ("budget", "--models", "--models", None),  # no model: it used to write an empty table, then fail
    ("budget", "--models m.muzero_model --out taken", "--out taken", saved_model()),  # (after every evaluation)
    ("audit", "--models m --positions 0", "--positions", None),
    ("collect", "--run-dir runs/x --wall-time 1", "--out", None),  # no default: it used to write to docs/
    ("collect", "--run-dir runs/nothing --wall-time 1 --out o", "--run-dir", None),
    ("report", "--out nothing", "--out", None),
    ("episode", "--model m.muzero_model", "not a whole model of muzero_minatar.py", saved_model(truncate=True)),
    ("episode", "--model m.muzero_model", "not a whole model of muzero_minatar.py", saved_model(channels=2)),
    ("episode", "--model m.muzero_model", "muzero_minatar.py has no flags board_size", saved_model(board_size=5)),
    ("match", "--model m.muzero_model", "a Breakthrough model of OpenSpiel's view", saved_model(script=bt, drop=("format",))),
    ("episode", "--model m.muzero_model", "m.muzero_model.json is not JSON", model_json(b"{not json")),
    ("weights", "--models m.muzero_model", "m.muzero_model.json is not JSON", model_json(b"")),
    ("episode", "--model m.muzero_model", "m.muzero_model.json is not UTF-8", model_json(b"\xff\xfe{}")),
    ("tree", "--model m.muzero_model", "holds a JSON list, not the object", model_json(b"[1, 2]")),
    ("episode", "--model m.muzero_model", "names the script 'muzero_nonexistent'", model_json(script="muzero_nonexistent")),
    ("episode", "--model m.muzero_model", "names the script 'json'", model_json(script="json")),  # never imported
    ("episode", "--model m.muzero_model", "the flags in m.muzero_model.json are not", model_json(eval_num_simulations=8)),
    (
        "episode",
        "--model m.muzero_model",
        "--eval-num-simulations must be positive",
        model_json(eval_num_simulations=-1, rehash=True),
    ),
    ("episode", "--model m.muzero_model", "--planner is 'bogus'", model_json(planner="bogus", rehash=True)),
    ("weights", "--models m.muzero_model", "--channels is '16', not int", model_json(channels="16", rehash=True)),
    ("ladder", "--run-dirs runs/x", "pip install -e '.[tools]'", no_statsmodels),  # (after the whole tournament)
    ("tree", "--model m.muzero_model", "pip install -e '.[tools]'", no_graphviz),
    # the hostile matrix's added cases
    ("episode", "--model m.muzero_model --opponent bogus", "--opponent", saved_model()),
    ("episode", "--model m.muzero_model --eval-mcts-simulations 0", "--eval-mcts-simulations", saved_model(script=bt)),
    ("tree", "--model m.muzero_model --step -1", "--step", saved_model()),
    ("tree", "--model m.muzero_model --simulations -1", "--simulations", saved_model()),
    ("budget", "--models m.muzero_model --episodes 0", "--episodes", saved_model()),
    ("budget", "--models m.muzero_model --mcts-simulations 0", "--mcts-simulations", saved_model(script=bt)),
    ("match", "--model m.muzero_model --games 3", "--games", saved_model(script=bt)),
    ("match", "--model m.muzero_model --games 0", "--games", saved_model(script=bt)),
    ("match", "--model m.muzero_model", "Breakthrough", saved_model()),  # a MinAtar model has no opponent
    ("tsne", "--model m.muzero_model --perplexity nan", "--perplexity", saved_model()),
    ("tsne", "--model m.muzero_model --positions 0", "--positions", saved_model()),
    ("random-returns", "--env-ids Bogus --out o", "--env-ids", None),
    ("random-returns", "--env-ids Breakout --episodes 0 --out o", "--episodes", None),
    ("random-returns", "--env-ids Breakout --sticky-action-prob 2 --out o", "--sticky-action-prob must be in [0, 1]", None),
    ("compare", "--runs nothing --out o", "--runs", None),
    ("audit", "--models m.muzero_model --simulations -1", "--simulations", saved_model(script=bt)),
    ("weights", "--models m.muzero_model.json", "--models", saved_model()),
    ("episode", "--model taken", "taken", saved_model()),
]


@pytest.mark.parametrize("tool, flags, named, setup", TOOL_CASES, ids=[f"{t} {n[-30:]}" for t, _, n, _ in TOOL_CASES])
def test_bad_tool_input_exits_2_naming_the_flag_and_writes_nothing(tmp_path, monkeypatch, capsys, tool, flags, named, setup):
    monkeypatch.chdir(tmp_path)
    for name in BLOCKED_IMPORTS:  # monkeypatch restores each entry, present or absent (not a copy of sys.modules:
        monkeypatch.setitem(sys.modules, name, sys.modules.get(name))  # jax's lazy imports must land in the real one)
        if sys.modules[name] is None:
            monkeypatch.delitem(sys.modules, name)
    if setup:
        setup(tmp_path)
    before = files(tmp_path)
    monkeypatch.setattr(sys, "argv", [tools.__file__, tool, *flags.split()])
    with pytest.raises(SystemExit) as exit_:
        runpy.run_path(tools.__file__, run_name="__main__")
    stderr = capsys.readouterr().err
    assert exit_.value.code == 2 and named in stderr and "Traceback" not in stderr, stderr
    assert files(tmp_path) == before


@pytest.mark.parametrize(
    "script, call, named",
    [
        (m, dict(eval_episodes=2.5), "eval_episodes must be an integer"),
        (m, dict(eval_episodes=True), "eval_episodes must be an integer"),
        (m, dict(eval_episodes=0), "eval_episodes must be positive"),
        (m, dict(seed="1"), "seed must be an integer"),
        (m, dict(seed=-1), "seed must be in [0, 2**32 - 1]"),
        (m, dict(opponent="bogus"), "opponent 'bogus': a muzero_minatar.py model plays alone"),
        (bt, dict(opponent="bogus"), "opponent must be 'random' or 'mcts'"),
        (bt, dict(eval_episodes=3), "eval_episodes must be even"),
    ],
)
def test_the_python_api_refuses_what_the_command_line_refuses(tmp_path, script, call, named):
    """tools.evaluate checks its arguments as the scripts and tools do on the command line, with their messages,
    before it plays: BadInput, never a TypeError or KeyError from inside."""
    saved_model(script=script)(tmp_path)
    with pytest.raises(tools.BadInput) as info:
        tools.evaluate(str(tmp_path / "m.muzero_model"), **call)
    assert named in str(info.value)
