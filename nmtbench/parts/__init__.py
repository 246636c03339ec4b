"""The parts every method is built from (no model of its own lives here; those are in
`methods/`): the method contract, the shared losses and decoders, batches, checkpoint files,
and pre-trained Hugging Face checkpoints (loading, freezing, vocabulary trimming)."""
