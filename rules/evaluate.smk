# Evaluation: BLEU both ways (tokenized = multi-bleu.perl, sacreBLEU with signature) + params.


rule evaluate:
    input:
        hyp=run_file("hyp.test.txt"),
        info=run_file("decode.test.json"),
        ref=lambda w: prepared(w.dataset, "test.tgt"),
    output:
        run_file("metrics.json"),
    params:
        run_dir=lambda w, input: os.path.dirname(input.hyp),
        lowercase=lambda w: "--lowercase" if dataset_spec(w)["lowercase"] else "",
        detok_lang=lambda w: dataset_spec(w)["detok_lang"],
    conda:
        "../envs/nmtbench.yaml"
    log:
        "logs/evaluate/{dataset}/{experiment}/seed{seed}.log",
    shell:
        "python -m nmtbench evaluate --run-dir {params.run_dir:q} --split test "
        "--hyp {input.hyp:q} --ref {input.ref:q} --out {output:q} {params.lowercase} "
        "--detok-lang {params.detok_lang:q} > {log:q} 2>&1"
