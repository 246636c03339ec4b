# Decoding: one trained run, decoded once per distinct decoding setting ({tag}) and split;
# optionally with checkpoint averaging; beam search or mask-predict, as the method decodes.
# Latency: the test set one sentence at a time, alone or against the table's baseline run.
# Distillation: a teacher run translates the training set, the targets of NAT students.


rule decode:
    input:
        summary=layout.TRAIN_SUMMARY,
        src=lambda w: prepared(w.dataset, f"{w.split}.src"),
    output:
        hyp=layout.HYP,
        info=layout.DECODE_INFO,
    params:
        run_dir=lambda w, input: os.path.dirname(input.summary),
        search=search_arguments,
        batch_size=lambda w: PLAN.decode_batch_size(w.dataset, w.run, w.tag),
        device=config.get("device", "auto"),
        first=[],
    conda:
        "../envs/models.yaml"
    log:
        "logs/decode/{dataset}/{run}/seed{seed}.{split}.{tag}.log",
    threads: resource("decode", "threads")
    resources:
        mem_mb=resource("decode", "mem_mb"),
        runtime=resource("decode", "runtime"),
        gpu=resource("decode", "gpu"),
    shell:
        "python -m nmtbench decode --run-dir {params.run_dir:q} --src {input.src:q} "
        "--out {output.hyp:q} --info {output.info:q} {params.search:q} "
        "--batch-size {params.batch_size:q} {params.first:q} "
        "--device {params.device:q} --threads {threads:q} > {log:q} 2>&1"


# Sequence-level knowledge distillation (Kim & Rush 2016): the teacher's translations of the
# training sources, with its own decoding settings, replace the targets NAT runs train on
# where the dataset sets `sequence_distillation` (rules/train.smk).
use rule decode as distill with:
    input:
        summary=layout.TRAIN_SUMMARY,
        src=lambda w: prepared(w.dataset, "train.src"),
    output:
        hyp=layout.DISTILLED_TARGETS,
        info=layout.DISTILLED_TARGETS_INFO,
    log:
        "logs/distill/{dataset}/{run}/seed{seed}.{tag}.log",
    threads: resource("translate", "threads")
    priority: 2  # every non-autoregressive run of the dataset waits for it
    resources:
        mem_mb=resource("translate", "mem_mb"),
        runtime=resource("translate", "runtime"),
        gpu=resource("translate", "gpu"),


# Back-translation (Sennrich et al. 2016): a reverse-direction run translates the first
# {sentences} lines of the target-side monolingual text of the dataset {forward}; runs there
# with `bt_sentences` train on these synthetic sources paired with those lines.
use rule decode as backtranslate with:
    input:
        summary=layout.TRAIN_SUMMARY,
        src=lambda w: back_translation.target_monolingual(PLAN, w.forward),
    output:
        hyp=layout.BACKTRANSLATE,
        info=layout.BACKTRANSLATE_INFO,
    params:
        run_dir=lambda w, input: os.path.dirname(input.summary),
        search=search_arguments,
        batch_size=lambda w: PLAN.decode_batch_size(w.dataset, w.run, w.tag),
        device=config.get("device", "auto"),
        first=lambda w: ["--max-lines", w.sentences],
    log:
        "logs/backtranslate/{dataset}/{run}/seed{seed}.{forward}.{sentences}.{tag}.log",
    threads: resource("translate", "threads")
    resources:
        mem_mb=resource("translate", "mem_mb"),
        runtime=resource("translate", "runtime"),
        gpu=resource("translate", "gpu"),
    wildcard_constraints:
        forward=r"[A-Za-z0-9_.-]+",
        sentences=r"\d+",


rule latency:
    input:
        summary=layout.TRAIN_SUMMARY,
        src=lambda w: prepared(w.dataset, "test.src"),
    output:
        layout.LATENCY,
    params:
        run_dir=lambda w, input: os.path.dirname(input.summary),
        search=search_arguments,
        baseline=[],
        device=config.get("device", "auto"),
        sentences=config["analysis"]["latency_sentences"],
        batch=config["analysis"].get("throughput_batch", 64),
    conda:
        "../envs/models.yaml"
    log:
        "logs/latency/{dataset}/{run}/seed{seed}.{tag}.log",
    threads: resource("decode", "threads")
    resources:
        mem_mb=resource("decode", "mem_mb"),
        runtime=resource("decode", "runtime"),
        gpu=resource("decode", "gpu"),
    shell:
        "python -m nmtbench latency --run-dir {params.run_dir:q} --src {input.src:q} "
        "--out {output:q} --sentences {params.sentences:q} "
        "--throughput-batch {params.batch:q} {params.search:q} "
        "{params.baseline:q} --device {params.device:q} --threads {threads:q} > {log:q} 2>&1"


# The speedup over a table's baseline: both runs timed in one job, sentence by sentence.
use rule latency as latency_vs_baseline with:
    input:
        summary=layout.TRAIN_SUMMARY,
        baseline=layout.fill(layout.TRAIN_SUMMARY, run="{baseline}"),
        src=lambda w: prepared(w.dataset, "test.src"),
    output:
        layout.LATENCY_VS,
    params:
        run_dir=lambda w, input: os.path.dirname(input.summary),
        search=search_arguments,
        baseline=baseline_latency_arguments,
        device=config.get("device", "auto"),
        sentences=config["analysis"]["latency_sentences"],
        batch=config["analysis"].get("throughput_batch", 64),
    log:
        "logs/latency/{dataset}/{run}/seed{seed}.{tag}.vs.{baseline}.{btag}.log",
