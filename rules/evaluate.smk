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
        lowercase=lambda w: "--lowercase" if dataset_spec(w)["lowercase"] else "",
        detok_lang=lambda w: dataset_spec(w)["detok_lang"],
        compound_split=lambda w: (
            "--compound-split" if dataset_spec(w).get("compound_split") else ""
        ),
    conda:
        "../envs/text.yaml"
    log:
        "logs/evaluate/{dataset}/{run}/seed{seed}.{split}.{tag}.log",
    shell:
        "python -m nmtbench evaluate --summary {input.summary:q} "
        "--run-config {params.run_config:q} --split {wildcards.split} "
        "--hyp {input.hyp:q} --info {input.info:q} --ref {input.ref:q} --out {output:q} "
        "{params.lowercase} {params.compound_split} --detok-lang {params.detok_lang:q} "
        "> {log:q} 2>&1"
