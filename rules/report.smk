# Report: results/tables.md from the requested tables' runs, with provenance.


rule report:
    input:
        run_metrics(),
    output:
        "results/tables.md",
    params:
        config=lambda w: nmtconfig.as_json(config),
        runs=run_dirs(),
        root=workflow.basedir,
    conda:
        "../envs/nmtbench.yaml"
    log:
        "logs/report.log",
    shell:
        "python -m nmtbench report --config {params.config:q} --runs {params.runs:q} "
        "--out {output:q} --root {params.root:q} > {log:q} 2>&1"
