# Report: results/tables.md (paper vs ours), results/claims.md (every paper claim, checked)
# and the figures, from the requested items' runs.


rule report:
    input:
        PLAN.targets(),
        pretrained_outputs(),
    output:
        tables=report(
            "results/tables.md",
            caption="../report/tables.rst",
            category="Tables",
        ),
        claims=report(
            "results/claims.md",
            caption="../report/claims.rst",
            category="Tables",
        ),
        figures=[
            report(path, caption="../report/figure.rst", category="Figures")
            for path in PLAN.figure_outputs()
            if path.endswith(".png")
        ],
        pdfs=[path for path in PLAN.figure_outputs() if path.endswith(".pdf")],
    params:
        config=lambda w: nmtconfig.as_json(config),
        root=workflow.basedir,
    conda:
        "../envs/models.yaml"
    log:
        "logs/report.log",
    shell:
        "python -m nmtbench report --config {params.config:q} --results results "
        "--out {output.tables:q} "
        "--root {params.root:q} > {log:q} 2>&1"
