"""The report, without torch: run outputs read back, the papers' claims checked, and
`results/tables.md` and the figures rendered."""
