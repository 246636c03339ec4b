# Decoding: beam search over the test set (optionally with checkpoint averaging).


rule decode:
    input:
        summary=run_file("train_summary.json"),
        src=lambda w: prepared(w.dataset, "test.src"),
    output:
        hyp=run_file("hyp.test.txt"),
        info=run_file("decode.test.json"),
    params:
        run_dir=lambda w, input: os.path.dirname(input.summary),
        s=decode_settings,
        device=config.get("device", "auto"),
    conda:
        "../envs/nmtbench.yaml"
    log:
        "logs/decode/{dataset}/{experiment}/seed{seed}.log",
    threads: resource("decode", "threads")
    resources:
        mem_mb=resource("decode", "mem_mb"),
        runtime=resource("decode", "runtime"),
        gpu=resource("decode", "gpu"),
    shell:
        "python -m nmtbench decode --run-dir {params.run_dir:q} --src {input.src:q} "
        "--out {output.hyp:q} --info {output.info:q} --beam {params.s[beam]} "
        "--lenpen {params.s[lenpen]} --lenpen-form {params.s[lenpen_form]} "
        "--checkpoint {params.s[checkpoint]} --average-last {params.s[average_last]} "
        "--device {params.device:q} --threads {threads} > {log:q} 2>&1"
