# Evaluation: BLEU both ways (tokenized = multi-bleu.perl, sacreBLEU with signature), ROUGE,
# params; per split and decoding setting.


rule evaluate:
    input:
        hyp=run_file("hyp.{split}.{tag}.txt"),
        info=run_file("decode.{split}.{tag}.json"),
        ref=lambda w: prepared(w.dataset, f"{w.split}.tgt"),
    output:
        run_file("metrics.{split}.{tag}.json"),
    params:
        run_dir=lambda w, input: os.path.dirname(input.hyp),
        lowercase=lambda w: "--lowercase" if dataset_spec(w)["lowercase"] else "",
        detok_lang=lambda w: dataset_spec(w)["detok_lang"],
        compound_split=lambda w: (
            "--compound-split" if dataset_spec(w).get("compound_split") else ""
        ),
    conda:
        "../envs/text.yaml"
    log:
        "logs/evaluate/{dataset}/{experiment}/seed{seed}.{split}.{tag}.log",
    shell:
        "python -m nmtbench evaluate --run-dir {params.run_dir:q} --split {wildcards.split} "
        "--hyp {input.hyp:q} --info {input.info:q} --ref {input.ref:q} --out {output:q} "
        "{params.lowercase} {params.compound_split} --detok-lang {params.detok_lang:q} "
        "> {log:q} 2>&1"
