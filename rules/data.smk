# Data: generate (toy world) or download and prepare, then train the WordPiece vocabularies.


rule toyworld:
    output:
        expand(prepared("{{dataset}}", "{split}.{side}"), split=SPLITS + ["mono"], side=["src", "tgt"]),
    params:
        world=lambda w: nmtconfig.as_json(dataset_spec(w).get("world", {})),
    conda:
        "../envs/nmtbench.yaml"
    log:
        "logs/data/{dataset}/toyworld.log",
    wildcard_constraints:
        dataset="|".join(toy_datasets()) or "^$",
    shell:
        "python -m nmtbench toyworld --out data/{wildcards.dataset}/prepared "
        "--world {params.world:q} > {log:q} 2>&1"


rule prepare:
    output:
        expand(prepared("{{dataset}}", "{split}.{side}"), split=SPLITS, side=["src", "tgt"]),
    params:
        kind=lambda w: dataset_spec(w)["kind"],
    conda:
        "../envs/nmtbench.yaml"
    log:
        "logs/data/{dataset}/prepare.log",
    wildcard_constraints:
        dataset="|".join(real_datasets()) or "^$",
    shell:
        "python -m nmtbench prepare --dataset {wildcards.dataset:q} --kind {params.kind:q} "
        "> {log:q} 2>&1"


rule tokenizer:
    input:
        tokenizer_corpora,
    output:
        tokenizer_file("{dataset}", "{side}"),
    params:
        vocab_size=lambda w: dataset_spec(w)["vocab_size"][w.side],
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/nmtbench.yaml"
    log:
        "logs/data/{dataset}/tokenizer.{side}.log",
    shell:
        "python -m nmtbench tokenizer --corpus {input:q} --out {params.out:q} "
        "--vocab-size {params.vocab_size} > {log:q} 2>&1"
