# Report: results/tables.md (paper vs ours), results/claims.md (every paper claim, checked),
# results/tables.json (tables.md for programs) and the figures, from the requested items' runs.


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
        # tables.md for programs: every cell with where it comes from (report/tables.schema.json)
        tables_json="results/tables.json",
        figures=[
            report(path, caption="../report/figure.rst", category="Figures")
            for path in PLAN.figure_outputs()
            if path.endswith(".png")
        ],
        pdfs=[path for path in PLAN.figure_outputs() if path.endswith(".pdf")],
    params:
        config=lambda w: nmtconfig.as_json(config),
        root=workflow.basedir,
        # as snakemake merges them: the Snakefile's configfile, then the command line's
        merged_from=[DEFAULT_CONFIGFILE]
        + [f for f in map(os.path.abspath, workflow.configfiles) if f != DEFAULT_CONFIGFILE],
    conda:
        "../envs/models.yaml"
    log:
        "logs/report.log",
    shell:
        "python -m nmtbench report --config {params.config:q} --results results "
        "--out {output.tables:q} --merged-from {params.merged_from:q} "
        "--root {params.root:q} > {log:q} 2>&1"
