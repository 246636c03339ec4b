# Pre-trained checkpoints, each a Hugging Face directory under data/pretrained/<name>/: hub
# checkpoints snapshotted once (so training runs offline, HF_HUB_OFFLINE=1 on cluster nodes),
# toy-world ones pre-trained here, and checkpoints whose vocabulary is trimmed to a dataset's
# (`trimmed`). Each writes the directory atomically.


rule snapshot:
    output:
        layout.PRETRAINED,
    params:
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/models.yaml"
    log:
        "logs/pretrained/{pretrained}.snapshot.log",
    shell:
        "python -m nmtbench snapshot {wildcards.pretrained:q} --out {params.out:q} > {log:q} 2>&1"


rule pretrain:
    input:
        corpus=lambda w: monolingual_corpora(pretraining_spec(w)["dataset"], pretraining_spec(w)["side"]),
        extra=lambda w: extra_corpora(pretraining_spec(w)),  # read for training only
        # the WordPiece trained on the data: the dataset's checkpoint may be this one
        tokenizer=lambda w: layout.TOKENIZER.format(dataset=pretraining_spec(w)["dataset"],
                                                    side=pretraining_spec(w)["side"]),
    output:
        layout.PRETRAINED_OUTPUTS,
    params:
        out=lambda w, output: os.path.dirname(output[0]),
        tokenizer=lambda w, input: os.path.dirname(input.tokenizer),
        settings=lambda w: nmtconfig.as_json(nmtconfig.pretrain_settings(pretraining_spec(w))),
        # last, so that without extra corpora the command is what it was before them
        # (Snakemake's code trigger compares it: an existing checkpoint is not made again)
        extra=lambda w, input: ["--train-only", *input.extra] if input.extra else [],
    conda:
        "../envs/models.yaml"
    log:
        "logs/pretrained/{pretrained}.pretrain.log",
    benchmark:
        "logs/pretrained/{pretrained}.benchmark.tsv"
    wildcard_constraints:
        pretrained="|".join(map(re.escape, config.get("pretraining", {}))) or "^$",
    threads: resource("train", "threads")
    priority: 2  # every run that loads the checkpoint waits for it
    resources:
        mem_mb=resource("train", "mem_mb"),
        runtime=resource("train", "runtime"),
        gpu=resource("train", "gpu"),
    shell:
        "python -m nmtbench pretrain --corpus {input.corpus:q} --tokenizer {params.tokenizer:q} "
        "--out {params.out:q} --settings {params.settings:q} --threads {threads:q} "
        "{params.extra:q}> {log:q} 2>&1"


rule trim:
    input:
        checkpoint=lambda w: checkpoint_marker(trimmed_spec(w)["checkpoint"]),
        corpus=lambda w: [prepared(trimmed_spec(w)["dataset"], f"train.{side}") for side in ("src", "tgt")],
    output:
        layout.PRETRAINED,
    params:
        out=lambda w, output: os.path.dirname(output[0]),
        checkpoint=lambda w, input: os.path.dirname(input.checkpoint),
        size=lambda w: trimmed_spec(w)["size"],
    conda:
        "../envs/models.yaml"
    log:
        "logs/pretrained/{pretrained}.trim.log",
    wildcard_constraints:
        pretrained="|".join(map(re.escape, config.get("trimmed", {}))) or "^$",
    shell:
        "python -m nmtbench trim --checkpoint {params.checkpoint:q} --corpus {input.corpus:q} "
        "--size {params.size:q} --out {params.out:q} > {log:q} 2>&1"


ruleorder: pretrain > snapshot
ruleorder: trim > snapshot
