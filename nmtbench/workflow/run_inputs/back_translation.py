"""Back-translation (Sennrich et al. 2016): a reverse-direction autoregressive run translates
the first lines of the dataset's target-side monolingual text into synthetic sources, added to
the training pairs of runs with `bt_sentences` (`bt_src`, and that text as `bt_tgt`). The
dataset names the reverse run (`datasets.<d>.back_translation`); the producing rule is
`backtranslate` (rules/decode.smk), and for real data `prepare_monolingual` (rules/data.smk)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nmtbench import layout
from nmtbench.errors import InputError
from nmtbench.workflow.plan.cells import generated
from nmtbench.workflow.run_inputs.kind import Data, RunInput, RunInputKind

if TYPE_CHECKING:
    from nmtbench.workflow.plan import Cell, Plan


@dataclass(frozen=True)
class BackTranslation:
    """Where a run's back-translated pairs come from: the run `reverse` translates the first
    `sentences` lines. One translation per dataset, as long as its largest `bt_sentences`:
    every run takes its own first lines."""

    reverse: Cell
    sentences: int


def source(plan: Plan, dataset: str, experiment: str) -> BackTranslation | None:
    """The back-translation an experiment with `bt_sentences` adds to its training data."""
    wanted = plan.train_settings(dataset, experiment).get("bt_sentences", 0)
    if not wanted:
        return None
    spec = plan.config["datasets"][dataset].get("back_translation")
    if spec is None:
        raise InputError(f"experiment {experiment!r} on dataset {dataset!r} adds {wanted} "
                         "back-translated sentences (bt_sentences), but config key "
                         f"'datasets.{dataset}.back_translation' is not set")
    reverse = plan.run_cell(spec["reverse"], spec["model"],
                            f"config key 'datasets.{dataset}.back_translation'")
    return BackTranslation(reverse, sentences(plan, dataset))


def sentences(plan: Plan, dataset: str) -> int:
    """The largest `bt_sentences` of any implemented experiment on the dataset (fixed by the
    catalogue, so asking for another table never re-translates)."""
    return max(plan.train_settings(dataset, e).get("bt_sentences", 0)
               for e in plan.experiments if plan.status(e, dataset) == "ok")


def target_monolingual(plan: Plan, dataset: str) -> str:
    """The target-side monolingual text a dataset back-translates: a toy world's own (also
    read backwards), or the corpus prepared for a real dataset (beside `prepared/`, which
    `prepare` replaces as a whole)."""
    if generated(plan.config["datasets"], dataset):
        return layout.PREPARED.format(dataset=dataset, file="mono.tgt")
    return layout.MONOLINGUAL.format(dataset=dataset)


class BackTranslated(RunInputKind):
    names = ("bt_src", "bt_tgt")

    def resolve(self, plan: Plan, dataset: str, experiment: str) -> list[RunInput]:
        found = source(plan, dataset, experiment)
        if found is None:
            return []
        return [RunInput("bt_src", found.reverse, layout.BACKTRANSLATE,
                         values={"forward": dataset, "sentences": found.sentences},
                         record=layout.BACKTRANSLATE_INFO),
                RunInput("bt_tgt", None, target_monolingual(plan, dataset))]

    def learned_from(self, plan: Plan, dataset: str, experiment: str,
                     where: Callable[[str, str, str], str]) -> list[tuple[str, str, str]]:
        if not plan.train_settings(dataset, experiment).get("bt_sentences"):
            return []
        spec = plan.config["datasets"][dataset].get("back_translation")
        if spec is None:  # said when the plan resolves the run's inputs
            return []
        return [(f"config key 'datasets.{dataset}.back_translation.model'", spec["reverse"],
                 spec["model"])]

    def check_config(self, plan: Plan) -> None:
        for dataset, spec in plan.config["datasets"].items():
            if "back_translation" in spec:
                _check_dataset(plan, dataset)

    def report_files(self, plan: Plan) -> set[str]:
        """The reverse models' test scores (a figure's caption names how well each
        translates)."""
        return {found.reverse.file(layout.METRICS, seed, split="test")
                for dataset, run in plan.runs()
                for found in [source(plan, dataset, run)] if found is not None
                for seed in plan.seeds}

    def check_given(self, settings: Mapping[str, Any], given: Mapping[str, str]) -> None:
        if settings.get("bt_sentences") and set(given) != set(self.names):
            raise InputError(f"bt_sentences is {settings['bt_sentences']} but no back-"
                             "translated data was given (--input bt_src=... --input "
                             "bt_tgt=...)")

    def load_data(self, data: Data, inputs: Mapping[str, str]) -> None:
        data.add_back_translations(inputs["bt_src"], inputs["bt_tgt"])


def _check_enough_text(plan: Plan, dataset: str, available: int) -> None:
    """A toy world's monolingual corpus holds as many sentences as its world says: the
    largest `bt_sentences` must fit in it (a real corpus's length is known once prepared,
    where the `backtranslate` job checks it)."""
    wanted = sentences(plan, dataset)
    if wanted > available:
        experiment = next(e for e in plan.experiments if plan.status(e, dataset) == "ok"
                          and plan.train_settings(dataset, e).get("bt_sentences") == wanted)
        raise InputError(f"experiment {experiment!r} on dataset {dataset!r}: bt_sentences "
                         f"{wanted} is more than the {available} sentences of its monolingual "
                         f"corpus (config key 'datasets.{dataset}.world.mono_sentences')")


def _check_dataset(plan: Plan, dataset: str) -> None:
    """The reverse model must be an autoregressive experiment on a dataset translating this
    one's target language into its source language; real data names its monolingual corpus."""
    datasets = plan.config["datasets"]
    spec, bt = datasets[dataset], datasets[dataset]["back_translation"]
    where = f"config key 'datasets.{dataset}.back_translation"
    reverse = datasets.get(bt["reverse"])
    if reverse is None:
        raise InputError(f"{where}.reverse': unknown dataset {bt['reverse']!r}")
    if reverse["kind"] == "reversed" or "src_lang" not in spec:  # no languages to compare
        if reverse.get("of") != dataset:
            raise InputError(f"{where}.reverse': {bt['reverse']!r} is not {dataset} read the "
                             f"other way round (kind: reversed, of: {dataset})")
    elif (reverse.get("src_lang"), reverse.get("tgt_lang")) != (
            spec["tgt_lang"], spec["src_lang"]):
        raise InputError(f"{where}.reverse': {bt['reverse']!r} does not translate "
                         f"{spec['tgt_lang']} into {spec['src_lang']}")
    model = bt["model"]
    if (model not in plan.experiments or plan.status(model) != "ok"
            or plan.decoding(bt["reverse"], model) != "at"):
        raise InputError(f"{where}.model': {model!r} is not an implemented autoregressive "
                         "experiment")
    if generated(datasets, dataset):
        if "corpus" in bt:
            raise InputError(f"{where}.corpus': a toy world back-translates its own "
                             "monolingual corpus; remove the key")
        _check_enough_text(plan, dataset, spec["world"]["mono_sentences"])
    elif spec["kind"] == "reversed":
        raise InputError(f"{where}': a reversed real dataset has no monolingual corpus of its "
                         "own; configure the real dataset of this direction instead")
    elif "corpus" not in bt:
        raise InputError(f"{where}.corpus' is missing (the target-side monolingual corpus "
                         "to back-translate)")
    else:
        from nmtbench.data.monolingual import check_sources as check_monolingual

        check_monolingual(dataset, spec, bt["corpus"], plan.config.get("sources", {}))
