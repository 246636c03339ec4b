# Data: generate (toy world) or download and prepare, then train the WordPiece vocabularies.


# One rule per set of optional splits its datasets make (`toyworld`, `toyworld_test_official`):
# a rule declares every file it writes.
for optional in OPTIONAL_SPLIT_SETS:

    rule:
        name:
            "_".join(["toyworld", *optional]).replace("-", "_")
        output:
            expand(
                layout.PREPARED,
                file=[f"{split}.{side}" for split in SPLITS + optional + ["mono"]
                      for side in ("src", "tgt")],
                allow_missing=True,
            ),
            manifest=layout.PREPARED_MANIFEST,
        params:
            out=lambda w: layout.PREPARED_DIR.format(dataset=w.dataset),
            world=lambda w: nmtconfig.as_json(dataset_spec(w).get("world", {})),
        conda:
            "../envs/models.yaml"
        log:
            "logs/data/{dataset}/toyworld.log",
        wildcard_constraints:
            dataset=datasets_either(with_optional_splits(datasets_of_kind("toyworld"), optional)),
        shell:
            "python -m nmtbench toyworld --out {params.out:q} "
            "--world {params.world:q} > {log:q} 2>&1"


# One download rule per source (download_statmt, download_multi30k, ...): a file is fetched
# from the source's base URL and kept only if its SHA-256 equals the one pinned in config.
for source in config.get("sources", {}):

    rule:
        name:
            f"download_{re.sub(r'[.-]', '_', source)}"
        output:
            f"{DOWNLOADS_DIR}/{source}/{{file}}",
        params:
            url=lambda w, s=source: source_url(config["sources"][s], w.file),
            checksums=lambda w, s=source: download_checksum_arguments(s, w.file),
        conda:
            "../envs/text.yaml"
        log:
            f"logs/download/{source}/{{file}}.log",
        wildcard_constraints:
            file="|".join(re.escape(f) for f in config["sources"][source]["files"]) or "^$",
        retries: 1
        shell:
            "python -m nmtbench download --url {params.url:q} {params.checksums:q} "
            "--out {output:q} > {log:q} 2>&1"


for optional in OPTIONAL_SPLIT_SETS:

    rule:
        name:
            "_".join(["prepare", *optional]).replace("-", "_")
        input:
            prepare_inputs,
        output:
            expand(
                layout.PREPARED,
                file=[f"{split}.{side}" for split in SPLITS + optional for side in ("src", "tgt")],
                allow_missing=True,
            ),
            manifest=layout.PREPARED_MANIFEST,
        params:
            spec=lambda w: nmtconfig.as_json(dataset_spec(w)),
            downloads=DOWNLOADS_DIR,
            out=lambda w, output: os.path.dirname(output.manifest),
        conda:
            "../envs/text.yaml"
        log:
            "logs/data/{dataset}/prepare.log",
        wildcard_constraints:
            dataset=datasets_either(with_optional_splits(real_datasets(), optional)),
        threads: resource("prepare", "threads")
        resources:
            mem_mb=resource("prepare", "mem_mb"),
            runtime=resource("prepare", "runtime"),
        shell:
            "python -m nmtbench prepare --dataset {wildcards.dataset:q} --spec {params.spec:q} "
            "--downloads {params.downloads:q} --out {params.out:q} --workers {threads:q} "
            "> {log:q} 2>&1"


# A reversed dataset (e.g. the reverse direction of a toy world, for back-translation) is its
# original's prepared files with the sides swapped.
rule reverse_dataset:
    input:
        reversed_input,
    output:
        layout.fill(layout.PREPARED, file="{part}.{side}"),
    conda:
        "../envs/text.yaml"
    log:
        "logs/data/{dataset}/reverse.{part}.{side}.log",
    wildcard_constraints:
        dataset=datasets_either(datasets_of_kind("reversed")),
        part="train|valid|test|test-official|mono",
    shell:
        "cp {input:q} {output:q} 2> {log:q}"


# The target-side monolingual corpus a real dataset back-translates (datasets.<d>.back_translation
# .corpus), processed like the dataset's own target side: its first sentences, as many as the
# dataset's largest bt_sentences.
rule prepare_monolingual:
    input:
        monolingual_inputs,
    output:
        mono=layout.MONOLINGUAL,
        manifest=layout.MONOLINGUAL_MANIFEST,
    params:
        spec=lambda w: nmtconfig.as_json(dataset_spec(w)),
        corpus=lambda w: dataset_spec(w)["back_translation"]["corpus"],
        sentences=lambda w: back_translation.sentences(PLAN, w.dataset),
        downloads=DOWNLOADS_DIR,
    conda:
        "../envs/text.yaml"
    log:
        "logs/data/{dataset}/monolingual.log",
    wildcard_constraints:
        dataset=datasets_either(monolingual_datasets()),
    threads: resource("prepare", "threads")
    resources:
        mem_mb=resource("prepare", "mem_mb"),
        runtime=resource("prepare", "runtime"),
    shell:
        "python -m nmtbench monolingual --dataset {wildcards.dataset:q} --spec {params.spec:q} "
        "--corpus {params.corpus:q} --max-sentences {params.sentences:q} "
        "--downloads {params.downloads:q} --out {output.mono:q} "
        "--workers {threads:q} > {log:q} 2>&1"


# A monolingual corpus's text in the language of a real dataset's side, processed as that side,
# which a checkpoint pre-trained here reads for training too (pretraining.<name>.extra_corpora).
rule extra_corpus:
    input:
        extra_corpus_inputs,
    output:
        text=layout.EXTRA_CORPUS,
        manifest=layout.EXTRA_CORPUS_MANIFEST,
    params:
        spec=lambda w: nmtconfig.as_json(dataset_spec(w)),
        downloads=DOWNLOADS_DIR,
    conda:
        "../envs/text.yaml"
    log:
        "logs/data/{dataset}/extra_corpus.{corpus}.{side}.log",
    wildcard_constraints:
        dataset=datasets_either(real_datasets()),
        corpus=NAME,
    threads: resource("prepare", "threads")
    resources:
        mem_mb=resource("prepare", "mem_mb"),
        runtime=resource("prepare", "runtime"),
    shell:
        "python -m nmtbench monolingual --dataset {wildcards.dataset:q} --spec {params.spec:q} "
        "--corpus {wildcards.corpus:q} --side {wildcards.side:q} "
        "--downloads {params.downloads:q} --out {output.text:q} "
        "--workers {threads:q} > {log:q} 2>&1"


rule tokenizer:
    wildcard_constraints:
        side=r"src|tgt|joint",  # joint: one vocabulary of both sides (`vocabulary: joint`)
    input:
        tokenizer_corpora,
    # (and its vocabulary_summary.json, undeclared: rule all asks for the vocabulary's files,
    # so a declared record missing in a directory made before it would train the vocabulary
    # and all after it again; the command replaces the whole directory)
    output:
        layout.TOKENIZER_OUTPUTS,
    params:
        vocab_size=lambda w: dataset_spec(w)["vocab_size"][w.side],
        out=lambda w, output: os.path.dirname(output[0]),
    conda:
        "../envs/models.yaml"
    log:
        "logs/data/{dataset}/tokenizer.{side}.log",
    shell:
        "python -m nmtbench tokenizer --corpus {input:q} --out {params.out:q} "
        "--vocab-size {params.vocab_size:q} > {log:q} 2>&1"
