# Analyses with compare-mt: paired bootstrap of a score (BLEU, sacreBLEU, a ROUGE F1) against a
# table's baseline row (significance marks), and BLEU by output-length bucket (length figures).


rule bootstrap:
    input:
        hyp=layout.HYP,
        baseline=layout.fill(layout.HYP, run="{baseline}", tag="{btag}"),
        ref=lambda w: prepared(w.dataset, f"{w.split}.tgt"),
    output:
        layout.BOOTSTRAP,
    params:
        lowercase=lambda w: flag("--lowercase", dataset_spec(w)["lowercase"]),
        compound_split=lambda w: flag("--compound-split", dataset_spec(w).get("compound_split")),
        detok_lang=lambda w: dataset_spec(w)["detok_lang"],
        samples=config["analysis"]["bootstrap_samples"],
    conda:
        "../envs/text.yaml"
    log:
        "logs/analyze/{dataset}/{run}/seed{seed}.bootstrap.{split}.{tag}.{score}.{baseline}.{btag}.log",
    shell:
        "python -m nmtbench bootstrap --hyp {input.hyp:q} --baseline {input.baseline:q} "
        "--ref {input.ref:q} --samples {params.samples:q} --seed {wildcards.seed:q} "
        "--score {wildcards.score:q} {params.lowercase:q} {params.compound_split:q} "
        "--detok-lang {params.detok_lang:q} --out {output:q} > {log:q} 2>&1"


rule buckets:
    input:
        hyp=layout.HYP,
        ref=lambda w: prepared(w.dataset, f"{w.split}.tgt"),
    output:
        layout.BUCKETS,
    params:
        lowercase=lambda w: flag("--lowercase", dataset_spec(w)["lowercase"]),
        compound_split=lambda w: flag("--compound-split", dataset_spec(w).get("compound_split")),
        cutoffs=lambda w: w.cutoffs.split("-"),
    conda:
        "../envs/text.yaml"
    log:
        "logs/analyze/{dataset}/{run}/seed{seed}.buckets.{split}.{tag}.{cutoffs}.log",
    shell:
        "python -m nmtbench buckets --hyp {input.hyp:q} --ref {input.ref:q} "
        "--cutoffs {params.cutoffs:q} {params.lowercase:q} {params.compound_split:q} "
        "--out {output:q} > {log:q} 2>&1"
