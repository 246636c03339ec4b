"""Workflow configuration: schema validation and cross-references, before any job runs.

`rules/common.smk` calls `check` before building the DAG, so a bad config or paper file stops
with one line naming the file and key; the returned plan turns the requested tables into files.
"""

from __future__ import annotations

import copy
import json
import math
import random
import re
from dataclasses import fields
from pathlib import Path
from typing import Any

import jsonschema

from nmtbench.data.casing import SIDES, lowercased_sides, reads_case
from nmtbench.data.recipes import RECIPES, check_sources, recipe_for
from nmtbench.data.toyworld import ToyWorld, WorldConfig, check_distinct, check_sizes
from nmtbench.errors import InputError, schema_key
from nmtbench.workflow import run_inputs, train_settings
from nmtbench.workflow.method_registry import MethodInfo, method_infos
from nmtbench.workflow.metric_registry import DETOK_LANGS
from nmtbench.workflow.papers import BLEU, EXTERNAL, PAPERS_DIR, load_catalogue
from nmtbench.workflow.plan import Plan, generated, toy_world
from nmtbench.workflow.plan.settings import PER_UPDATE
from nmtbench.workflow.pretrain_settings import PretrainConfig
from nmtbench.workflow.pretrained_names import checkpoint_dir
from nmtbench.workflow.schema import SCHEMA, Validator
from nmtbench.workflow.train_settings import TrainConfig
from nmtbench.workflow.yaml_reader import read_yaml

# `published_back_translations: true`: trained with a published back-translated corpus (a dataset
# holding one serves it)
# `tokens_per_update`, `sentences_per_update`: the update's size, all GPUs together; the plan
# derives `update_freq` from it and the train rule's GPUs (Plan.update_freq)
SETTINGS_OUTSIDE_TRAINER = {"method", "decode", "description", "published_back_translations",
                            *PER_UPDATE}
# A toy world's split sizes, beside its generator's settings (WorldConfig)
WORLD_SIZES = ("train_pairs", "valid_pairs", "test_pairs", "test_official_pairs",
               "mono_sentences")
# The schema's $defs.name in words, for the error messages
NAME_RULE = ("letters, digits, _ and - in words joined by single dots, starting with a letter "
             "or digit: it becomes part of file paths and commands")


def name_pattern(schema_path: str | Path) -> str:
    """The schema's pattern of a safe name ($defs.name), unanchored: the workflow constrains
    its wildcards with it, so a path part is only ever a name the config check allows."""
    schema = read_yaml(schema_path)
    return schema["$defs"]["name"]["pattern"].removeprefix("^").removesuffix("$")


def validate(config: dict[str, Any], schema: dict[str, Any]) -> None:
    """Check the config against the JSON schema; the first error becomes a one-line message."""
    validator = Validator(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(config))
    if error is None:
        if bad := _non_finite(config):
            raise InputError(f"config key '{bad[0]}': {bad[1]} is not a finite number")
        return
    if error.validator == "required":
        missing = error.message.split("'")[1]
        key = f"{schema_key(error)}.{missing}" if error.absolute_path else missing
        raise InputError(f"config key '{key}' is missing")
    raise InputError(f"config key '{schema_key(error)}': {_message(error, schema)}")


def _message(error: jsonschema.ValidationError, schema: dict[str, Any]) -> str:
    """The error's message: a schema's own (`x-message`) where it has one; a word YAML 1.1
    would read as a boolean says how to write one; a name that fails $defs.name says what a
    name may hold."""
    if isinstance(error.schema, dict) and "x-message" in error.schema:
        return error.schema["x-message"].format(instance=error.instance)
    if (error.validator == "type" and "boolean" in error.validator_value
            and isinstance(error.instance, str)
            and error.instance.lower() in ("yes", "no", "on", "off", "y", "n")):
        return (f"{error.message} (the workflow reads YAML 1.2, where a boolean is true or "
                "false and other words are text)")
    if (error.validator == "pattern"
            and error.validator_value == schema.get("$defs", {}).get("name", {}).get("pattern")):
        return f"{error.instance!r} is not a name ({NAME_RULE})"
    return error.message


def _check_download_paths(sources: dict[str, Any], name: str) -> None:
    """A download's file key is its path under data/downloads/<source>/: names (`name`, the
    schema's pattern) joined by "/", so it stays inside that directory."""
    for source, spec in sources.items():
        for file in spec["files"]:
            if not all(re.fullmatch(name, part) for part in file.split("/")):
                raise InputError(f"config key 'sources.{source}.files': {file!r} is not a "
                                 f"relative path of names ({NAME_RULE})")


def _check_detok_lang(lang: str, where: str) -> None:
    """Moses' detokenizer takes any code and quietly applies its generic rules to one it has
    none for, so a typo ('EN', 'english') would change sacreBLEU unnoticed: refuse it.
    `where` names the setting."""
    if lang not in DETOK_LANGS:
        raise InputError(f"{where}: unknown detokenizer language {lang!r}; known: "
                         f"{', '.join(DETOK_LANGS)}")


def _non_finite(value: Any, key: str = "") -> tuple[str, float] | None:
    """The dotted key and value of the first NaN or infinity (YAML's .nan, .inf) in `value`.
    No setting may be one: JSON schema cannot say "finite", and as every comparison with NaN
    is false, `minimum` lets it through."""
    if isinstance(value, float) and not math.isfinite(value):
        return key, value
    items = (value.items() if isinstance(value, dict)
             else enumerate(value) if isinstance(value, list) else ())
    for k, v in items:
        if bad := _non_finite(v, f"{key}.{k}" if key else str(k)):
            return bad
    return None


def check(config: dict[str, Any], schema_path: str | Path,
          papers_dir: str | Path = PAPERS_DIR) -> Plan:
    """Schema, paper files, then references: experiments -> methods, tables -> datasets.

    Returns the plan, so the workflow builds its DAG from exactly what was checked. The
    implemented methods are the schema's (`$defs.methods`): checking imports none of them.
    """
    # `--config seeds=[1,2]` arrives as strings (snakemake parses lists with YAML's BaseLoader)
    if isinstance(config, dict) and isinstance(config.get("seeds"), list):
        config["seeds"] = [int(s) if isinstance(s, str) and s.isdigit() else s
                           for s in config["seeds"]]
    schema = read_yaml(schema_path)
    validate(config, schema)
    _check_download_paths(config.get("sources", {}), schema["$defs"]["name"]["pattern"])
    resolve_reversed(config["datasets"])
    definitions = schema["$defs"]
    plan = Plan(config, load_catalogue(papers_dir), method_infos(definitions))
    _check_experiments(config, plan, definitions["decode"])
    _check_datasets(config, plan, definitions["decode"])
    _check_pretrained(config)
    plan.targets()  # resolves every requested cell: unknown names and datasets fail here
    _check_bleu_records(config, plan, Path(papers_dir))
    _check_runs(config, plan, definitions["seed"]["maximum"])
    return plan


# A paper's `bleu` record field -> the config key of a dataset that scores that way, what
# each known value of the field sets the key to ("unknown" checks nothing), and the metrics
# the key changes (compounds are split for tokenized BLEU only)
SCORING_KEYS = {"case": ("lowercase", {"lowercased": True, "cased": False},
                         ("bleu_tokenized", "sacrebleu")),
                "compound_split": ("compound_split", {True: True, False: False},
                                   ("bleu_tokenized",))}


def _check_bleu_records(config: dict[str, Any], plan: Plan, papers_dir: Path) -> None:
    """Every requested table's record of how its paper scored BLEU (papers/*.yaml `bleu`)
    agrees with the config of each real dataset that scores its BLEU columns: case-insensitive
    where the paper's was, compounds split where the paper's were. Otherwise ours would be
    another number than the paper's under the same heading. Toy worlds score as they are."""
    datasets = config["datasets"]
    for table in plan.tables:
        if table.bleu is None:
            continue
        for _, j, cell in plan.table_cells(table):
            col = table.columns[j]
            if col.metric not in BLEU or generated(datasets, cell.dataset):
                continue
            record = table.bleu_scoring(col.key)
            for field, (key, values, metrics) in SCORING_KEYS.items():
                wanted = values.get(record[field])
                actual = bool(datasets[cell.dataset].get(key, False))
                if wanted is None or wanted == actual or col.metric not in metrics:
                    continue
                override = field in table.bleu.get("columns", {}).get(col.key, {})
                name = table.name.split(".", 1)[1]
                where = f"tables.{name}.bleu{f'.columns.{col.key}' if override else ''}"
                raise InputError(
                    f"{papers_dir / table.paper}.yaml: key '{where}.{field}': {table.name} "
                    f"reports BLEU with {field} {_yaml(record[field])} on {col.dataset}, but "
                    f"config key 'datasets.{cell.dataset}.{key}' is {_yaml(actual)}; set it "
                    f"to {_yaml(wanted)}, or map {col.dataset} to a dataset scored that way")


def _yaml(value: Any) -> str:
    """A scalar as YAML writes it (true, not True)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


def _check_experiments(config: dict[str, Any], plan: Plan, decode_schema: dict) -> None:
    """Every experiment's method exists; each implemented one's settings (and the defaults)
    are its method's and the trainer's; then the runs it loads from."""
    implemented = plan.implemented
    methods = {*implemented, EXTERNAL, *plan.catalogue.planned}
    for name in config.get("experiments", {}):
        method = plan.experiments[name]["method"]
        if method not in methods:  # a typo would otherwise read as "not implemented"
            raise InputError(f"config key 'experiments.{name}.method': unknown method "
                             f"{method!r}; known: {', '.join(sorted(methods))}")
    defaults_checked = set()
    for name, experiment in plan.experiments.items():
        method = experiment["method"]
        if all(plan.status(name, dataset) != "ok" for dataset in config["datasets"]):
            continue  # not implemented yet, or quoted from other work: no run, nothing to check
        info = implemented[method]
        where = (f"config key 'experiments.{name}" if name in config.get("experiments", {})
                 else f"{plan.catalogue.sources.get(name, 'config')}: key 'experiments.{name}")
        _check_settings(experiment, info, decode_schema, where)
        for key in config["defaults"]:
            _check_key(key, info, "config key 'defaults")
        if method not in defaults_checked:
            check_against(info.schema, config["defaults"], "config key 'defaults")
            defaults_checked.add(method)
    # once every experiment's settings are checked: the runs they learn from, of every kind
    run_inputs.check_config(plan, lambda dataset, experiment, key: _setting_origin(
        config, plan, dataset, experiment, key))


def _check_datasets(config: dict[str, Any], plan: Plan, decode_schema: dict) -> None:
    """Each dataset's overrides and sources; the dataset map's targets."""
    implemented = plan.implemented
    for dataset, spec in config["datasets"].items():
        if "detok_lang" in spec:
            _check_detok_lang(spec["detok_lang"], f"config key 'datasets.{dataset}.detok_lang'")
        # a toy world's settings together (the schema checks each alone), one sentence drawn
        # in its length range, its size, and its pairs within the distinct sentences its
        # words and settings make: refused here, not by its job
        if "world" in spec:
            try:
                world = WorldConfig.from_dict({k: v for k, v in spec["world"].items()
                                               if k not in WORLD_SIZES})
                ToyWorld(world).sample(random.Random(world.seed))
                sizes = {k: v for k, v in spec["world"].items() if k in WORLD_SIZES}
                check_sizes(**sizes)
                check_distinct(world, **{k: v for k, v in sizes.items()
                                         if k != "mono_sentences"})
            except InputError as err:
                raise InputError(f"config key 'datasets.{dataset}.world': {err}") from None
        for name, settings in spec.get("overrides", {}).items():
            where = f"config key 'datasets.{dataset}.overrides.{name}"
            method = plan.experiments[name]["method"] if name in plan.experiments else name
            if method not in implemented:
                raise InputError(f"{where}': neither a method ({', '.join(sorted(implemented))}) "
                                 "nor an experiment with one")
            for key in settings:  # checked like an experiment's keys: a typo is never ignored
                _check_key(key, implemented[method], where)
            check_against(implemented[method].schema,
                           {k: v for k, v in settings.items() if k != "decode"}, where)
            check_against(decode_schema, settings.get("decode", {}), f"{where}.decode")
        if spec["kind"] not in ("toyworld", "reversed"):  # a recipe, and downloads for it
            check_sources(dataset, spec, config.get("sources", {}))
    for paper_dataset, dataset in config.get("dataset_map", {}).items():
        if dataset not in config["datasets"]:
            raise InputError(f"config key 'dataset_map.{paper_dataset}': unknown dataset "
                             f"{dataset!r}")


def _check_pretrained(config: dict[str, Any]) -> None:
    """Pre-training settings, trimmed checkpoints and the datasets' checkpoint names."""
    for name, spec in config.get("pretraining", {}).items():
        where = f"config key 'pretraining.{name}"
        if spec["dataset"] not in config["datasets"]:
            raise InputError(f"{where}.dataset': {spec['dataset']!r} is not a configured "
                             "dataset (pre-training reads its text)")
        try:
            heldout = PretrainConfig.from_dict(pretrain_settings(spec)).heldout_sentences
        except InputError as err:
            raise InputError(f"{where}': {err}") from None
        world = toy_world(config["datasets"], spec["dataset"])
        sides = 2 if spec["side"] == "joint" else 1  # a joint one reads both sides' text
        if world is not None and heldout >= sides * world["mono_sentences"]:
            raise InputError(f"{where}.heldout_sentences': {heldout} held-out sentences leave "
                             f"none of the {sides * world['mono_sentences']} of its toy world's "
                             "monolingual text to train on (config key 'datasets."
                             f"{config['datasets'][spec['dataset']].get('of', spec['dataset'])}"
                             ".world.mono_sentences')")
        _check_extra_corpora(config, spec, f"{where}.extra_corpora'")
    for name, spec in config.get("trimmed", {}).items():
        where = f"config key 'trimmed.{name}"
        if name in config.get("pretraining", {}):
            raise InputError(f"{where}': also a `pretraining` name")
        if spec["dataset"] not in config["datasets"]:
            raise InputError(f"{where}.dataset': unknown dataset {spec['dataset']!r}")
        if spec["checkpoint"] in config["trimmed"]:
            raise InputError(f"{where}.checkpoint': {spec['checkpoint']!r} is trimmed itself; "
                             "trim its original")
        try:
            checkpoint_dir(spec["checkpoint"], config.get("pretraining"))
        except InputError as err:
            raise InputError(f"{where}.checkpoint': {err}") from None
    for dataset, spec in config["datasets"].items():
        for side, name in spec.get("checkpoints", {}).items():
            try:
                checkpoint_dir(name, config.get("pretraining"))
            except InputError as err:
                raise InputError(f"config key 'datasets.{dataset}.checkpoints.{side}': "
                                 f"{err}") from None


def _check_runs(config: dict[str, Any], plan: Plan, seed_max: int) -> None:
    """Each run the DAG trains: its back-translation configured, the seeds of the runs it
    loads valid, every checkpoint and vocabulary it reads named by something the workflow can
    make, and no cased checkpoint reading a lowercased side."""
    lowercased: dict[str, set[str]] = {}
    for dataset, run in plan.trained_runs():
        if dataset not in lowercased:
            lowercased[dataset] = _lowercased_sides(config, dataset)
        _check_casing(config, plan, dataset, run, lowercased[dataset])
        for given in plan.run_inputs(dataset, run).values():
            if given.seed_offset and max(config["seeds"]) + given.seed_offset > seed_max:
                raise InputError(f"config key 'seeds': seed {max(config['seeds'])} plus the "
                                 f"seed_offset {given.seed_offset} of run {dataset}/{run}'s "
                                 f"{given.name} exceeds the largest seed, {seed_max}")
        vocabularies = {f"vocabulary ({side})": plan.vocabulary(dataset, run, side)[0]
                        for side in ("src", "tgt")}
        for role, name in {**plan.checkpoints(dataset, run), **vocabularies}.items():
            if name is None:  # the dataset's own WordPiece
                continue
            try:
                checkpoint_dir(name, config.get("pretraining"))
            except InputError as err:
                raise InputError(f"run {dataset}/{run}, {role}: {err}") from None
        _check_train_pairs(config, plan, dataset, run)
        if refused := train_settings.refusal(plan.train_settings(dataset, run)):
            where = _setting_origin(config, plan, dataset, run, refused[0])
            raise InputError(f"{where}.{refused[0]}': run {dataset}/{run}: {refused[1]}")
    _check_decoding(plan)


def _check_train_pairs(config: dict[str, Any], plan: Plan, dataset: str, run: str) -> None:
    """A data-size run (`train_pairs`) on a toy world asks for at most the pairs it has: more
    would silently train on all of them, a row no other than the full data's."""
    world = toy_world(config["datasets"], dataset)
    wanted = plan.train_settings(dataset, run).get("train_pairs")
    if world is not None and wanted is not None and wanted > world["train_pairs"]:
        raise InputError(f"run {dataset}/{run}: train_pairs {wanted} is more than the "
                         f"{world['train_pairs']} training pairs of its toy world (config key "
                         f"'datasets.{config['datasets'][dataset].get('of', dataset)}.world."
                         "train_pairs')")


def _check_decoding(plan: Plan) -> None:
    """Each requested decoding makes sense (`DecodeSettings.refusal`: what the model's sizes
    decide is checked when the workflow starts), and one that averages the last k epoch or
    update checkpoints has a run that trains and keeps k of them, as far as its settings
    say (an epoch's updates depend on the corpus); found when the decode job starts, after
    the training, otherwise."""
    for cell in dict.fromkeys(c for c in plan.cells() if c.run is not None and c.tag is not None):
        where = f"run {cell.dataset}/{cell.run} ({cell.experiment})"
        decode = plan.decode_for_tag(cell.tag)
        if refusal := decode.refusal():
            raise InputError(f"{where}: {refusal}")
        trainer = TrainConfig.from_dict(plan.train_settings(cell.dataset, cell.run))
        if decode.average_of == "epochs":
            kept = min(trainer.max_epochs, trainer.keep_last_epochs)
            how = f"max_epochs {trainer.max_epochs}, keep_last_epochs {trainer.keep_last_epochs}"
        else:
            saved = (trainer.max_updates // trainer.save_interval_updates
                     if trainer.max_updates else trainer.keep_interval_updates)
            kept = min(saved, trainer.keep_interval_updates)
            how = (f"keep_interval_updates {trainer.keep_interval_updates}, "
                   f"save_interval_updates {trainer.save_interval_updates}, "
                   f"max_updates {trainer.max_updates}")
        if decode.average_last > kept:
            raise InputError(
                f"{where}: decode key 'average_last' {decode.average_last} averages more "
                f"{decode.average_of[:-1]} checkpoints than the run keeps ({kept}: {how})")


def _lowercased_sides(config: dict[str, Any], dataset: str) -> set[str]:
    """The sides of `dataset` its preparation lowercases (`nmtbench.data.casing`); a reversed
    dataset's are its original's, swapped."""
    spec = config["datasets"][dataset]
    if spec["kind"] == "reversed":
        swap = {"src": "tgt", "tgt": "src"}
        return {swap[side] for side in _lowercased_sides(config, spec["of"])}
    if spec["kind"] not in RECIPES:
        return set()
    return lowercased_sides(spec, recipe_for(dataset, spec).lowercase, config.get("trimmed"))


def _check_casing(config: dict[str, Any], plan: Plan, dataset: str, run: str,
                  lowercased: set[str]) -> None:
    roles = plan.checkpoint_roles(run)
    for role, name in plan.checkpoints(dataset, run).items():
        for side in SIDES if roles[role] == "joint" else (roles[role],):
            if side in lowercased and reads_case(name, config.get("trimmed")):
                raise InputError(
                    f"run {dataset}/{run}, {role}: {name!r} reads cased text, but dataset "
                    f"{dataset!r} lowercases its {side} side (its recipe does, and "
                    f"datasets.{dataset}.checkpoints.{side} does not read case); add {side} to "
                    f"datasets.{dataset}.keep_case, or give this run an uncased checkpoint")


# What a reversed dataset does not take over from the one it reverses: how that one is made,
# and what is trained on it (overrides may name one side's checkpoints).
NOT_REVERSED = {"kind", "world", "sequence_distillation", "back_translation",
                "published_back_translations", "compound_split", "overrides"}


def resolve_reversed(datasets: dict[str, Any]) -> None:
    """Complete every `kind: reversed` dataset in place: the dataset `of` read the other way
    round (its prepared files with the sides swapped), so a reverse model for back-translation
    trains on exactly the forward data. Languages, vocabulary sizes and checkpoints swap
    sides; case carries over; keys the entry sets itself win (overrides are its own: the
    original's may name a side's checkpoint)."""
    for name, spec in datasets.items():
        if spec["kind"] != "reversed":
            continue
        base = datasets.get(spec["of"])
        if base is None or base["kind"] == "reversed":
            raise InputError(f"config key 'datasets.{name}.of': {spec['of']!r} is not a "
                             "configured dataset that is not itself reversed")
        inherited = {k: v for k, v in base.items() if k not in NOT_REVERSED}
        for key in ("vocab_size", "checkpoints"):
            if key in base:
                inherited[key] = {side: base[key][other] for side, other
                                  in (("src", "tgt"), ("tgt", "src"), ("joint", "joint"))
                                  if other in base[key]}
        if "src_lang" in base:
            inherited.update(src_lang=base["tgt_lang"], tgt_lang=base["src_lang"],
                             detok_lang=base["src_lang"])
        datasets[name] = {**inherited, **spec}


def _check_key(key: str, info: MethodInfo, where: str) -> None:
    """A setting the trainer, the method or the workflow reads; `where` is the message's
    prefix up to the key."""
    if key in info.unread:
        raise InputError(f"{where}.{key}' is not read by method {info.name!r} "
                         f"({info.unread[key]})")
    if key not in {f.name for f in fields(TrainConfig)} | SETTINGS_OUTSIDE_TRAINER | info.keys:
        raise InputError(f"{where}.{key}' is not a setting of the trainer or of "
                         f"method {info.name!r}")


def _setting_origin(config: dict[str, Any], plan: Plan, dataset: str, experiment: str,
                    key: str) -> str:
    """Where the resolved setting `key` of an experiment on a dataset was written, as the
    message prefix up to the key: the dataset's overrides, the experiment, or the defaults."""
    overrides = config["datasets"][dataset].get("overrides", {})
    for name in (experiment, plan.experiments[experiment]["method"]):
        if key in overrides.get(name, {}):
            return f"config key 'datasets.{dataset}.overrides.{name}"
    if key in plan.experiments[experiment]:
        if experiment in config.get("experiments", {}):
            return f"config key 'experiments.{experiment}"
        return (f"{plan.catalogue.sources.get(experiment, 'config')}: key "
                f"'experiments.{experiment}")
    return "config key 'defaults"


def _check_extra_corpora(config: dict[str, Any], spec: dict[str, Any], where: str) -> None:
    """A pre-training's extra corpora: each known, with text in the language of every side it
    reads and a download entry for it; a toy world reads its own monolingual corpus."""
    if not spec.get("extra_corpora"):
        return
    dataset = spec["dataset"]
    if generated(config["datasets"], dataset):
        raise InputError(f"{where}: dataset {dataset!r} is a toy world, which pre-trains on its "
                         "own monolingual corpus; remove the key")
    from nmtbench.data.monolingual import check_sources as check_monolingual  # loads sacremoses

    sides = ("src", "tgt") if spec["side"] == "joint" else (spec["side"],)
    for corpus in spec["extra_corpora"]:
        for side in sides:
            try:
                check_monolingual(dataset, config["datasets"][dataset], corpus,
                                  config.get("sources", {}), side)
            except InputError as err:
                raise InputError(f"{where}: {err}") from None


# Where a `pretraining` entry's text comes from, beside its PretrainConfig fields
PRETRAINING_TEXT = ("dataset", "side", "extra_corpora")


def pretrain_settings(spec: dict[str, Any]) -> dict[str, Any]:
    """A `pretraining` entry's PretrainConfig fields (without where its text comes from)."""
    return {k: v for k, v in spec.items() if k not in PRETRAINING_TEXT}


def _check_settings(settings: dict[str, Any], info: MethodInfo, decode_schema: dict[str, Any],
                    where: str) -> None:
    """An experiment's settings: each key the trainer's, the method's or the workflow's, and
    every value as the schema says; `where` is the messages' prefix up to the key."""
    for key in settings:
        _check_key(key, info, where)
    info.decoding(settings, where)
    for key in PER_UPDATE:
        wanted = settings.get(key, 1)
        if isinstance(wanted, bool) or not isinstance(wanted, int) or wanted < 1:
            raise InputError(f"{where}.{key}': {wanted!r} is not a positive integer")
    check_against(info.schema, {k: v for k, v in settings.items()
                                 if k not in SETTINGS_OUTSIDE_TRAINER}, where)
    if bad := _non_finite(settings):  # a paper's own settings: the config's are checked
        raise InputError(f"{where}.{bad[0]}': {bad[1]} is not a finite number")
    check_against(decode_schema, settings.get("decode", {}), f"{where}.decode")


def check_run_settings(settings: dict[str, Any], where: str,
                       schema_path: str | Path = SCHEMA) -> None:
    """A run's resolved settings as `train` receives them, checked as the workflow checks an
    experiment's (a config given to `train` by hand meets the same schema)."""
    definitions = read_yaml(schema_path)["$defs"]
    implemented = method_infos(definitions)
    if "method" not in settings:
        raise InputError(f"{where}: key 'method' is missing")
    method = settings["method"]
    if not isinstance(method, str):
        raise InputError(f"{where}: key 'method': {method!r} is not a method's name")
    if method not in implemented:
        raise InputError(f"{where}: key 'method': unknown method {method!r}; known: "
                         f"{', '.join(sorted(implemented))}")
    _check_settings(settings, implemented[method], definitions["decode"], f"{where}: key 'run")
    if refused := train_settings.refusal(settings):
        raise InputError(f"{where}: key 'run.{refused[0]}': {refused[1]}")


def check_no_aliases(config: dict[str, Any], where: str = "config") -> None:
    """No mapping or list of a config read from YAML is the value of two keys. A YAML alias
    (`key: *name`) makes them one object, and Snakemake merges a later `--configfile` into it
    in place: a change meant for one key would silently change the other too (`{<<: *name}`
    copies instead)."""
    seen: dict[int, str] = {}

    def walk(value: Any, path: str) -> None:
        if not isinstance(value, dict | list):
            return
        if id(value) in seen:
            raise InputError(f"{where}: keys '{seen[id(value)]}' and '{path}' are one YAML "
                             "alias (*name): a config merged over them would change both; "
                             "write {<<: *name} to copy the mapping")
        seen[id(value)] = path
        items = value.items() if isinstance(value, dict) else enumerate(value)
        for key, item in items:
            walk(item, f"{path}.{key}" if path else str(key))

    walk(config, "")


def check_world(world: dict[str, Any], where: str, schema_path: str | Path = SCHEMA) -> None:
    """A toy world's settings and split sizes as `toyworld` receives them, checked against
    the schema's datasets.*.world as the workflow checks a config's."""
    schema = read_yaml(schema_path)
    spec = schema["properties"]["datasets"]["additionalProperties"]["properties"]["world"]
    check_against({**spec, "$defs": schema["$defs"]}, world, f"{where}: key 'world")


def check_pretrain_settings(settings: dict[str, Any], where: str,
                            schema_path: str | Path = SCHEMA) -> None:
    """A pre-training's settings as `pretrain` receives them, checked against the schema's
    pretraining entries (without where the corpus comes from) as the workflow checks them."""
    schema = read_yaml(schema_path)
    spec = dict(schema["properties"]["pretraining"]["additionalProperties"])
    spec["required"] = [key for key in spec["required"] if key not in ("dataset", "side")]
    check_against({**spec, "$defs": schema["$defs"]}, settings, f"{where}: key 'settings")


def check_against(schema: dict[str, Any], values: dict[str, Any], where: str) -> None:
    """Settings the config schema does not reach (papers' decoding, dataset overrides, a
    command's JSON options) against its definitions; `where` is the message's prefix up to
    the key."""
    error = jsonschema.exceptions.best_match(
        Validator(schema).iter_errors(values))
    if error is not None:
        key = "" if not error.absolute_path else f".{schema_key(error)}"
        raise InputError(f"{where}{key}': {_message(error, schema)}")


def load_config(paths: list[str | Path]) -> dict[str, Any]:
    """Read config files and merge each over the previous, recursively, as snakemake's
    `--configfile` does; one that is not a mapping (an empty one too, as Snakemake refuses
    it) is an error naming it."""
    config: dict[str, Any] = {}
    for path in paths:
        data = read_yaml(path)
        if not isinstance(data, dict):
            held = ("nothing" if data is None else "a list" if isinstance(data, list)
                    else "a single value")
            raise InputError(f"{path}: a config file must hold a mapping, not {held}")
        check_no_aliases(data, str(path))
        _merge(config, data)
    return config


def check_command_line(argv: list[str]) -> None:
    """Snakemake's command line keeps, of `--configfile` or `--config` given twice, the
    last flag's files or values only (argparse replaces the list), and of a key given twice
    in `--config` the last value (mappings, `key={...}`, it merges): a config file or
    setting written there would be dropped without a word. Either is refused, naming the
    flag or the key."""
    given: list[tuple[str | None, list[str]]] = []  # each option's flag and its values
    for token in argv:
        if not token.startswith("-"):
            if given:
                given[-1][1].append(token)
            continue
        name, _, value = token.partition("=") if token.startswith("--") else (token[:2], "",
                                                                              token[2:])
        flag = ("--configfile" if len(name) > len("--config") and "--configfiles".startswith(name)
                else "--config" if name in ("--config", "-C") else None)
        given.append((flag, [value] if value else []))
    for flag, what in (("--configfile", "files"), ("--config", "values")):
        times = [values for f, values in given if f == flag]
        if len(times) > 1:
            raise InputError(f"{flag} is given {len(times)} times: Snakemake reads only the "
                             f"last one's {what}; give them all after one {flag}")
    keys = [entry.partition("=")[0] for f, values in given if f == "--config"
            for entry in values if not entry.partition("=")[2].startswith("{")]
    for key in keys:
        if keys.count(key) > 1:
            raise InputError(f"--config: key {key!r} is given {keys.count(key)} times; "
                             "Snakemake would keep its last value")


def workflow_config(default: str | Path, configfiles: list[str | Path],
                    overrides: dict[str, Any], replace: bool = False) -> dict[str, Any]:
    """The config the workflow runs on, read by `load_config` from the files Snakemake
    reads (the default, unless `--replace-workflow-config`, then each `--configfile`) and
    merged with `--config`'s values (`overrides`) as Snakemake merges them. Snakemake's own
    reader keeps a key written twice and names neither the file nor the line of an error in
    the default config file."""
    config = load_config([*([] if replace else [default]), *configfiles])
    _merge(config, copy.deepcopy(overrides))
    return config


def _merge(base: dict[str, Any], update: dict[str, Any]) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value


def as_json(obj: Any) -> str:
    """Canonical JSON: the same config always gives the same string (no spurious reruns)."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"))
