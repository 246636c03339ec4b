"""Data, without torch: downloading the releases, preparing each dataset as its papers did,
the generated toy world, monolingual corpora and WordPiece vocabularies."""
