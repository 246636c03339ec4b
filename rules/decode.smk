# Decoding: one trained run, decoded once per distinct decoding setting ({tag}) and split;
# optionally with checkpoint averaging. Latency: the test set one sentence at a time.


rule decode:
    input:
        summary=run_file("train_summary.json"),
        src=lambda w: prepared(w.dataset, f"{w.split}.src"),
    output:
        hyp=run_file("hyp.{split}.{tag}.txt"),
        info=run_file("decode.{split}.{tag}.json"),
    params:
        run_dir=lambda w, input: os.path.dirname(input.summary),
        s=decode_settings,
        device=config.get("device", "auto"),
    conda:
        "../envs/models.yaml"
    log:
        "logs/decode/{dataset}/{experiment}/seed{seed}.{split}.{tag}.log",
    threads: resource("decode", "threads")
    resources:
        mem_mb=resource("decode", "mem_mb"),
        runtime=resource("decode", "runtime"),
        gpu=resource("decode", "gpu"),
    shell:
        "python -m nmtbench decode --run-dir {params.run_dir:q} --src {input.src:q} "
        "--out {output.hyp:q} --info {output.info:q} --beam {params.s[beam]} "
        "--lenpen {params.s[lenpen]} --lenpen-form {params.s[lenpen_form]} "
        "--max-len-a {params.s[max_len_a]} --max-len-b {params.s[max_len_b]} "
        "--checkpoint {params.s[checkpoint]} --average-last {params.s[average_last]} "
        "--device {params.device:q} --threads {threads} > {log:q} 2>&1"


rule latency:
    input:
        summary=run_file("train_summary.json"),
        src=lambda w: prepared(w.dataset, "test.src"),
    output:
        run_file("latency.{tag}.json"),
    params:
        run_dir=lambda w, input: os.path.dirname(input.summary),
        s=decode_settings,
        device=config.get("device", "auto"),
        sentences=config["analysis"]["latency_sentences"],
    conda:
        "../envs/models.yaml"
    log:
        "logs/latency/{dataset}/{experiment}/seed{seed}.{tag}.log",
    threads: resource("decode", "threads")
    resources:
        mem_mb=resource("decode", "mem_mb"),
        runtime=resource("decode", "runtime"),
        gpu=resource("decode", "gpu"),
    shell:
        "python -m nmtbench latency --run-dir {params.run_dir:q} --src {input.src:q} "
        "--out {output:q} --sentences {params.sentences} --beam {params.s[beam]} "
        "--lenpen {params.s[lenpen]} --lenpen-form {params.s[lenpen_form]} "
        "--max-len-a {params.s[max_len_a]} --max-len-b {params.s[max_len_b]} "
        "--checkpoint {params.s[checkpoint]} --average-last {params.s[average_last]} "
        "--device {params.device:q} --threads {threads} > {log:q} 2>&1"
