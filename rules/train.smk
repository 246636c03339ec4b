# Training: one run per (dataset, run, seed); resumes from checkpoints/last.pt if killed.
# A job given several GPUs (resources: gpu) trains data-parallel, one torchrun process per GPU.
# Only train_summary.json (written last) and config.json are declared, so a killed run is never
# taken as done, and a record deleted by hand is made again (resuming: no update).


rule train:
    input:
        unpack(train_inputs),
    output:
        layout.TRAIN_SUMMARY,
        layout.RUN_CONFIG,  # declared so that one deleted by hand is made again
    params:
        run_dir=lambda w, output: os.path.dirname(output[0]),
        experiment=experiment_json,
        device=config.get("device", "auto"),
        compile="--compile" if config.get("compile", False) else "--no-compile",
        # functions of the input too, as they were before, which Snakemake's record of
        # params leaves out: the same command after an upgrade does not rerun the run
        src_tokenizer=lambda w, input: run_paths(w)["src_tokenizer"],
        tgt_tokenizer=lambda w, input: run_paths(w)["tgt_tokenizer"],
        pretrained=pretrained_arguments,
        inputs=run_input_arguments,
        launcher=train_launcher,
    conda:
        "../envs/models.yaml"
    log:
        "logs/train/{dataset}/{run}/seed{seed}.log",
    benchmark:
        "logs/train/{dataset}/{run}/seed{seed}.benchmark.tsv"
    threads: resource("train", "threads")
    # training is most of the work: started before the short jobs (decode, evaluate, ...), which
    # then fill the cores at the end instead of one long run finishing alone
    priority: 1
    resources:
        mem_mb=resource("train", "mem_mb"),
        runtime=resource("train", "runtime"),
        gpu=resource("train", "gpu"),
    shell:
        "{params.launcher:q} train --run-dir {params.run_dir:q} --config {params.experiment:q} "
        "--train-src {input.train_src:q} --train-tgt {input.train_tgt:q} "
        "--valid-src {input.valid_src:q} --valid-tgt {input.valid_tgt:q} "
        "--src-tokenizer {params.src_tokenizer:q} --tgt-tokenizer {params.tgt_tokenizer:q} "
        "{params.pretrained:q} {params.inputs:q} "
        "--device {params.device:q} {params.compile:q} --threads {threads:q} >> {log:q} 2>&1"


# A C-MLM teacher's top-K soft targets of the training set (Chen et al. 2020): every target
# position masked once; the students that name the teacher (`teacher:`) train on them.
rule soft_targets:
    input:
        summary=layout.TRAIN_SUMMARY,
        train_src=lambda w: prepared(w.dataset, "train.src"),
        train_tgt=lambda w: prepared(w.dataset, "train.tgt"),
        valid_src=lambda w: prepared(w.dataset, "valid.src"),
        valid_tgt=lambda w: prepared(w.dataset, "valid.tgt"),
    output:
        soft=layout.SOFT_TARGETS,
        info=layout.SOFT_TARGETS_INFO,
    params:
        run_dir=lambda w, input: os.path.dirname(input.summary),
        device=config.get("device", "auto"),
    conda:
        "../envs/models.yaml"
    log:
        "logs/soft_targets/{dataset}/{run}/seed{seed}.top{top_k}.log",
    benchmark:
        "logs/soft_targets/{dataset}/{run}/seed{seed}.top{top_k}.benchmark.tsv"
    wildcard_constraints:
        top_k=r"\d+",
    threads: resource("translate", "threads")
    priority: 1
    resources:
        mem_mb=resource("translate", "mem_mb"),
        runtime=resource("translate", "runtime"),
        gpu=resource("translate", "gpu"),
    shell:
        "python -m nmtbench soft-targets --run-dir {params.run_dir:q} "
        "--train-src {input.train_src:q} --train-tgt {input.train_tgt:q} "
        "--valid-src {input.valid_src:q} --valid-tgt {input.valid_tgt:q} "
        "--out {output.soft:q} --info {output.info:q} --top-k {wildcards.top_k:q} "
        "--device {params.device:q} --threads {threads:q} > {log:q} 2>&1"
