"""What the methods are built from: the method contract, the shared losses and decoders, and
pre-trained Hugging Face checkpoints (loading, freezing, vocabulary trimming)."""
