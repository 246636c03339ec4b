"""How the report reads a table: its cells, the columns that are one measurement on this
data, the cells a claim compares, the baseline a cell is tested against."""

from __future__ import annotations

from nmtbench.workflow.papers import Claim, Column, Figure, Table
from nmtbench.workflow.plan.cells import Cell


class ReportCells:
    """A part of `Plan`: the cells of tables, claims and figures as the report groups them."""

    def table_cells(self, table: Table) -> list[tuple[int, int, Cell]]:
        return [(i, j, self.cell(row.dataset(col), row.experiment,
                                 f"{table.name} column {col.key!r}"))
                for i, row in enumerate(table.rows) for j, col in enumerate(table.columns)]

    def column_groups(self, table: Table, experiments: list[str | None] | None = None,
                      ) -> list[list[int]]:
        """The table's column indices, those that are one measurement on this data together
        (e.g. three language pairs all mapped onto the toy world): the same split and metric,
        and in every row (or the rows of `experiments`) the same cell."""
        rows = [r for r in table.rows if experiments is None or r.experiment in experiments]
        groups: dict[tuple, list[int]] = {}
        for j, col in enumerate(table.columns):
            cells = (self.cell(row.dataset(col), row.experiment, f"{table.name} column "
                               f"{col.key!r}") for row in rows)
            groups.setdefault((col.split, col.metric, *cells), []).append(j)
        return list(groups.values())

    def claim_cells(self, claim: Claim) -> list[tuple[list[Column], Cell, Cell | None]]:
        """The columns a claim is about, those that are one measurement on this data
        together, each with the claimed row's cell and the cell it is compared with (None for
        a claim against a number)."""
        table = self.catalogue.tables[claim.table]
        rows = {row.experiment: row for row in table.rows}
        compared = []
        for group in self.column_groups(table, [claim.row, claim.than]):
            columns = [table.columns[j] for j in group if table.columns[j].key in claim.columns]
            if columns:
                compared.append((columns, *(None if name is None else self.cell(
                    rows[name].dataset(columns[0]), name, claim.table)
                    for name in (claim.row, claim.than))))
        return compared

    def figure_cells(self, figure: Figure) -> list[Cell]:
        return [self.cell(figure.dataset, e, figure.name) for e in figure.experiments()]

    def _baseline_cells(self, table: Table) -> dict[int, Cell]:
        if table.baseline is None:
            return {}
        cells = {j: self.cell(col.dataset, table.baseline, table.name)
                 for j, col in enumerate(table.columns)}
        return {j: cell for j, cell in cells.items() if cell.status == "ok"}

    def baseline_cell(self, table: Table, column: int) -> Cell | None:
        return self._baseline_cells(table).get(column)
