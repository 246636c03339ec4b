# Evaluation: BLEU both ways (tokenized = multi-bleu.perl, sacreBLEU with signature), ROUGE,
# params; per split and decoding setting.


rule evaluate:
    input:
        hyp=layout.HYP,
        info=layout.DECODE_INFO,
        summary=layout.TRAIN_SUMMARY,
        ref=lambda w: prepared(w.dataset, f"{w.split}.tgt"),
    output:
        layout.METRICS,
    params:
        run_config=lambda w: layout.RUN_CONFIG.format(**dict(w.items())),
        lowercase=lambda w: flag("--lowercase", dataset_spec(w)["lowercase"]),
        detok_lang=lambda w: dataset_spec(w)["detok_lang"],
        compound_split=lambda w: flag("--compound-split", dataset_spec(w).get("compound_split")),
    conda:
        "../envs/text.yaml"
    log:
        "logs/evaluate/{dataset}/{run}/seed{seed}.{split}.{tag}.log",
    shell:
        "python -m nmtbench evaluate --summary {input.summary:q} "
        "--run-config {params.run_config:q} --split {wildcards.split:q} "
        "--hyp {input.hyp:q} --info {input.info:q} --ref {input.ref:q} --out {output:q} "
        "{params.lowercase:q} {params.compound_split:q} --detok-lang {params.detok_lang:q} "
        "> {log:q} 2>&1"
