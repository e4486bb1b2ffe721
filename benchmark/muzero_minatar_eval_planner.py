"""How much of a MinAtar model's evaluation return is the evaluation planner's noise? Saved models evaluated with
the thesis' test planner (Table 5.1: temperature 0.25 over visit counts, Dirichlet noise 0.1 at the root, the
scripts' default), with a greedy one (the most visited action, no root noise) and with the training planner (its
temperature, Dirichlet noise, c1 and simulations), on the same episodes:

    python benchmark/muzero_minatar_eval_planner.py --models runs/*/muzero_minatar.muzero_model --episodes 128 \
        --out docs/benchmark/muzero_minatar/eval_planner

Any muzero_minatar.py or muzero_minatar_reanalyze.py model (--save-model). Writes {out}/eval_planner.csv, one row
per model and planner (mean return, standard error, episodes), and prints them.
"""

import argparse
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import pandas as pd  # noqa: E402

from muzero_tools import BadInput, fail, git_commit, load_model, machine_line, play  # noqa: E402

PLANNERS = {  # flag values replacing the model's own, for its evaluation planner only
    "thesis": lambda a: {},
    "greedy": lambda a: {"eval_temperature": 0.0, "dirichlet_fraction": 0.0},
    "training": lambda a: {
        "eval_temperature": a.temperature,
        "eval_dirichlet_alpha": a.dirichlet_alpha,
        "eval_pb_c_init": a.pb_c_init,
        "eval_num_simulations": a.num_simulations,
    },
}


def evaluate_planners(models: list[str], episodes: int, seed: int) -> pd.DataFrame:
    agents = [load_model(m) for m in models]  # every model checked before the first evaluation
    rows = []
    for path, (script, args, net, params) in zip(models, agents):
        if args.planner != "muzero":
            fail(f"--models {path}: a {args.planner} planner; its evaluation has no noise to remove")
        for name, flags in PLANNERS.items():
            returns = play(script, dataclasses.replace(args, **flags(args)), net, params, episodes, seed, "random")[0]
            rows.append(
                {
                    "model": path,
                    "env_id": args.env_id,
                    "seed": args.seed,
                    "planner": name,
                    "mean": returns.mean(),
                    "stderr": returns.std(ddof=1) / len(returns) ** 0.5,
                    "episodes": len(returns),
                }
            )
            print(f"{path} ({name} planner): {returns.mean():.2f} +- {rows[-1]['stderr']:.2f}", flush=True)
    return pd.DataFrame(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", required=True, help="saved MinAtar models (--save-model)")
    parser.add_argument("--episodes", type=int, default=128, help="evaluation episodes per model and planner")
    parser.add_argument("--seed", type=int, default=0, help="fixes the environments and the search noise")
    parser.add_argument("--out", default="", help="folder of eval_planner.csv (default: print only)")
    cli = parser.parse_args()
    if cli.episodes < 2:
        parser.error(f"--episodes must be at least 2 (got {cli.episodes}): a standard error needs two")
    try:
        table = evaluate_planners(cli.models, cli.episodes, cli.seed)
    except BadInput as e:
        parser.error(str(e))
    if cli.out:
        os.makedirs(cli.out, exist_ok=True)
        table["commit"], table["machine"] = git_commit(cli.out), machine_line()
        table.to_csv(os.path.join(cli.out, "eval_planner.csv"), index=False)
