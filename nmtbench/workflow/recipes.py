"""Each paper run's effective recipe (batch per update, stopping, rate, averaging, decoding)
beside the paper's (`recipes:` in papers/*.yaml), and the differences a config states.

A config copies the papers' experiments but trains them with its own defaults and resources,
so a run can differ from its paper in how long and on how large a batch it trains without any
single setting looking wrong. The effective recipe is what the run would do: tokens per update
are max_tokens x update_freq x the train rule's GPUs (`resources.train.gpu`, one process per
GPU), whatever each key says alone. A difference is either stated in the config
(`recipe_deviations: {experiment: {key: reason}}`) or an error of the config; a stated
deviation where the recipes agree is stale.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nmtbench.workflow.papers import Recipe
from nmtbench.workflow.train_settings import TrainConfig

if TYPE_CHECKING:
    from nmtbench.workflow.plan import Plan

# The recipe's keys, in the order the table shows them (papers/schema.yaml $defs.recipe)
KEYS = ("tokens_per_update", "sentences_per_update", "updates", "epochs", "stopping", "lr",
        "lr_schedule", "warmup_updates", "average_last", "beam", "lenpen")
DECODING_KEYS = ("average_last", "beam", "lenpen")


@dataclass
class RunRecipe:
    """One experiment on one paper dataset: ours (key -> value; None: no such setting, e.g.
    no sentence cap, or no decoding for a teacher), the paper's, and what differs."""

    paper: str
    paper_dataset: str
    dataset: str
    experiment: str
    ours: dict[str, Any]
    theirs: Recipe | None
    differs: list[str] = field(default_factory=list)


def effective(plan: Plan, dataset: str, experiment: str) -> dict[str, Any]:
    """The recipe the config gives the experiment on a configured dataset."""
    cfg = TrainConfig.from_dict(plan.train_settings(dataset, experiment))
    gpus = max(1, int(plan.config["resources"]["train"]["gpu"]))
    per_update = cfg.update_freq * gpus
    ours: dict[str, Any] = {
        "tokens_per_update": cfg.max_tokens * per_update,
        "sentences_per_update": cfg.max_sentences * per_update or None,
        "updates": cfg.max_updates or None,
        "epochs": cfg.max_epochs,
        # what may end it first: a patience always can; else the update cap where one is set
        "stopping": (f"patience {cfg.patience}" if cfg.patience
                     else "updates" if cfg.max_updates else "epochs"),
        "lr": cfg.lr, "lr_schedule": cfg.lr_schedule, "warmup_updates": cfg.warmup_updates,
        **dict.fromkeys(DECODING_KEYS)}
    decoding = plan.decoding(dataset, experiment)
    if decoding != "none":
        decode = plan.decode_settings(dataset, experiment)
        ours.update(average_last=(decode.average_last, decode.average_of),
                    beam=decode.length_beam if decoding == "nat" else decode.beam,
                    lenpen=(decode.lenpen, decode.lenpen_form))
    return ours


def _same(key: str, ours: Any, fact: dict[str, Any]) -> bool:
    value = fact["value"]
    if key in ("lenpen", "average_last"):  # a value and its form
        if ours is None:
            return False
        number, form = ours
        return math.isclose(number, value, rel_tol=1e-3) and fact.get("form", form) == form
    if key == "stopping":  # the rule, not patience's count (its validations differ)
        return ours.split()[0] == value
    if isinstance(value, float) and isinstance(ours, int | float):
        return math.isclose(ours, value, rel_tol=1e-3)  # a rate derived from eta, rounded
    return ours == value


def _runs(plan: Plan) -> list[tuple[str, str, str]]:
    """(paper, paper dataset, experiment) of every implemented cell of the requested tables
    and figures, and of every recipe (teachers and parents are in no table)."""
    found = [(t.paper, row.dataset(column), row.experiment)
             for t in plan.tables for row in t.rows for column in t.columns]
    found += [(f.paper, f.dataset, e) for f in plan.figures for e in f.experiments()]
    papers = {t.paper for t in plan.tables} | {f.paper for f in plan.figures}
    found += [(r.paper, d, e) for (e, d), r in plan.catalogue.recipes.items()
              if r.paper in papers]
    configured = {*plan.config.get("dataset_map", {}), *plan.config["datasets"]}
    return [(paper, dataset, experiment)
            for paper, dataset, experiment in dict.fromkeys(found) if dataset in configured
            and plan.status(experiment, plan.dataset(dataset, "recipe")) == "ok"]


def run_recipes(plan: Plan) -> list[RunRecipe]:
    """Every paper run of the plan with its effective recipe, the paper's, and the keys where
    they differ (the paper's stated values only)."""
    found = []
    for paper, paper_dataset, experiment in _runs(plan):
        dataset = plan.dataset(paper_dataset, "recipe")
        theirs = plan.catalogue.recipes.get((experiment, paper_dataset))
        ours = effective(plan, dataset, experiment)
        differs = [k for k, fact in (theirs.facts if theirs else {}).items()
                   if not _same(k, ours[k], fact)]
        found.append(RunRecipe(paper, paper_dataset, dataset, experiment, ours, theirs,
                               differs))
    return found


def deviations(plan: Plan) -> dict[str, dict[str, str]]:
    """The config's stated deviations: experiment -> recipe key -> reason."""
    return plan.config.get("recipe_deviations", {})


def unexplained(plan: Plan, runs: list[RunRecipe]) -> list[str]:
    """One line per difference from a paper's recipe that the config states no reason for,
    and per stated deviation that matches no difference (stale)."""
    stated = deviations(plan)
    lines = [f"{r.experiment} on {r.dataset}: {key} is {_show(key, r.ours[key])}, "
             f"{r.paper} gives {_fact(r.theirs.facts[key])} (config key "
             f"'recipe_deviations.{r.experiment}.{key}' states no reason)"
             for r in runs for key in r.differs if key not in stated.get(r.experiment, {})]
    differing = {(r.experiment, key) for r in runs for key in r.differs}
    lines += [f"config key 'recipe_deviations.{e}.{key}': {e} follows its paper's {key} "
              "wherever it runs (or has no recipe for it); drop the deviation"
              for e, keys in stated.items() for key in keys if (e, key) not in differing]
    return lines


def _show(key: str, value: Any) -> str:
    if value is None:
        return "—"
    if key == "lenpen":
        return f"{value[0]:g} ({value[1]})"
    if key == "average_last":
        return f"last {value[0]} ({value[1]})" if value[0] else "one"
    return f"{value:g}" if isinstance(value, float) else str(value)


def _fact(fact: dict[str, Any]) -> str:
    value = fact["value"]
    text = f"{value:g}" if isinstance(value, float) else str(value)
    return text + (f" ({fact['form']})" if "form" in fact else "")


def _cell(run: RunRecipe, key: str, stated: dict[str, str]) -> str:
    ours = _show(key, run.ours[key])
    fact = run.theirs.facts.get(key) if run.theirs else None
    if fact is None:
        silent = run.theirs is not None and key in run.theirs.not_stated
        return f"{ours} / not stated" if silent else ours
    if key not in run.differs:
        return f"{ours} ✓"
    mark = "deviation" if key in stated else "**differs, no reason**"
    return f"{ours} / {_fact(fact)} ({mark})"


def markdown(plan: Plan) -> str:
    """Per paper, a table of its runs: ours / the paper's, ✓ where they agree; then the
    sources, the config's stated deviations and what is left unexplained."""
    runs = run_recipes(plan)
    stated = deviations(plan)
    out = []
    for paper in dict.fromkeys(r.paper for r in runs):
        mine = [r for r in runs if r.paper == paper]
        out += [f"## {paper}", "", "Ours, then the paper's where it differs (✓: the same; "
                "not stated: the paper and its authors' code are silent).", "",
                "| dataset | experiment | " + " | ".join(KEYS) + " |",
                "|---|---|" + "---|" * len(KEYS)]
        out += [f"| {r.paper_dataset} | {r.experiment} | "
                + " | ".join(_cell(r, k, stated.get(r.experiment, {})) for k in KEYS) + " |"
                for r in mine]
        sources = dict.fromkeys(f"{k}: {f['source']}" + (f" — {f['how']}" if "how" in f else "")
                                for r in mine if r.theirs for k, f in r.theirs.facts.items())
        notes = dict.fromkeys(n for r in mine if r.theirs for n in r.theirs.notes)
        out += ["", "Sources:", "", *(f"- {s}" for s in sources), *(f"- {n}" for n in notes)]
        named = dict.fromkeys(r.experiment for r in mine if r.differs)
        reasons = [f"- {e}, {k}: {why}" for e in named for k, why in stated.get(e, {}).items()]
        out += (["", "Deviations stated by the config:", "", *reasons] if reasons else []) + [""]
    if left := unexplained(plan, runs):
        out += ["## Unexplained", "", *(f"- {line}" for line in left), ""]
    return "\n".join(out)
