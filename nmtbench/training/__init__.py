"""Training: the shared loop every method trains through, batches, checkpoints, data-parallel
processes, toy-world pre-training, and the run inputs (other runs' outputs) taken in."""
