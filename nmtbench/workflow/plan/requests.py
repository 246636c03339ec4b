"""What was asked (the requested tables, claims and figures), where it is measured, and
whether each experiment can run there."""

from __future__ import annotations

from functools import cached_property

from nmtbench.errors import InputError
from nmtbench.workflow.papers import EXTERNAL, Claim, Figure, Table
from nmtbench.workflow.plan.cells import NOT_IMPLEMENTED, not_built


class Requests:
    """A part of `Plan`: the requested items and each experiment's status on a dataset."""

    @cached_property
    def names(self) -> list[str]:
        asked = self.config["tables"]
        known = self.catalogue.names()
        if asked == ["all"]:
            return known
        for name in asked:
            if name not in known:
                raise InputError(f"config key 'tables': unknown table or figure {name!r}; "
                                 f"known: {', '.join(known)}")
        return list(dict.fromkeys(asked))

    @property
    def tables(self) -> list[Table]:
        return [self.catalogue.tables[n] for n in self.names if n in self.catalogue.tables]

    @property
    def claims(self) -> list[Claim]:
        """The claims about the requested tables."""
        requested = {table.name for table in self.tables}
        return [c for c in self.catalogue.claims if c.table in requested]

    @property
    def figures(self) -> list[Figure]:
        return [self.catalogue.figures[n] for n in self.names if n in self.catalogue.figures]

    def dataset(self, paper_dataset: str, where: str) -> str:
        """The configured dataset that stands for the paper's one."""
        name = self.config.get("dataset_map", {}).get(paper_dataset, paper_dataset)
        if name not in self.config["datasets"]:
            raise InputError(f"{where}: dataset {paper_dataset!r} is not configured (add it "
                             "under 'datasets' or map it under 'dataset_map')")
        return name

    def comparable(self, paper_dataset: str, dataset: str) -> bool:
        """Is our number measured on the paper's data (so a difference means something)?"""
        return (dataset == paper_dataset
                and self.config["datasets"][dataset]["kind"] != "toyworld")

    def status(self, experiment: str, dataset: str | None = None) -> str:
        """"ok", NOT_IMPLEMENTED or EXTERNAL; on a dataset, as its overrides leave the
        experiment (the toy world's GPT-2 stands in for a GPT no code can build), and a
        dataset made with a published back-translated corpus gives an experiment asking for
        one (`published_back_translations: true`, both) what it asks for."""
        spec = self.experiments[experiment]
        if spec["method"] == EXTERNAL:
            return EXTERNAL
        if dataset is not None:
            spec = {**spec, **self.overrides(dataset, experiment)}
            if self.config["datasets"][dataset].get("published_back_translations"):
                # the dataset holds the published corpus
                spec["published_back_translations"] = False
        if spec["method"] not in self.implemented or not_built(spec,
                                                                self.implemented[spec["method"]]):
            return NOT_IMPLEMENTED
        return "ok"
